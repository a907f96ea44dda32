"""Device config: transport-only fields stripped, validation, the ack."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.engine.phones.device_config import (
    MAX_COMMAND_LENGTH,
    MAX_FIELD_LENGTH,
    device_config_ack,
    prepare_device_config,
)
from bridge.protocol import DeviceConfig, SetDeviceConfigCommand, decode_phone_to_bridge, encode


def config(**overrides: Any) -> DeviceConfig:
    payload: dict[str, Any] = {"label": "Pixel", "appUnderTest": "kubo", **overrides}
    command = decode_phone_to_bridge(json.dumps({"type": "set-device-config", "config": payload}))
    assert isinstance(command, SetDeviceConfigCommand)
    return command.config


def test_transport_only_fields_are_stripped() -> None:
    record = prepare_device_config(
        config(
            role="test-target",
            serial="R58M",
            meshIp="100.64.0.7",
            meshPubkey="ab" * 32,
            customPackage="com.example",
            customBuildCmd="./gradlew assembleDebug",
            projectDir="/home/me/app",
        )
    )
    assert record == {
        "label": "Pixel",
        "role": "test-target",
        "serial": "R58M",
        "appUnderTest": "kubo",
        "customPackage": "com.example",
        "customBuildCmd": "./gradlew assembleDebug",
        "projectDir": "/home/me/app",
    }


def test_minimal_config() -> None:
    assert prepare_device_config(config()) == {"label": "Pixel", "appUnderTest": "kubo"}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"label": "x" * (MAX_FIELD_LENGTH + 1)}, "label is too long"),
        ({"customBuildCmd": "x" * (MAX_COMMAND_LENGTH + 1)}, "customBuildCmd is too long"),
        ({"serial": "a\x00b"}, "serial must not contain control characters"),
        ({"customPackage": "com.x\n"}, "customPackage must not contain control characters"),
        ({"projectDir": "relative/dir"}, "projectDir must be an absolute path"),
    ],
    ids=["long-label", "long-command", "nul", "newline", "relative-dir"],
)
def test_refusals(overrides: dict[str, Any], expected: str) -> None:
    result = prepare_device_config(config(**overrides))
    assert isinstance(result, str) and expected in result


def test_a_long_build_command_within_its_own_limit_is_fine() -> None:
    result = prepare_device_config(config(customBuildCmd="x" * MAX_COMMAND_LENGTH))
    assert isinstance(result, dict)


def test_ack() -> None:
    assert json.loads(encode(device_config_ack())) == {"type": "device-config-ack", "success": True}
    refused = json.loads(encode(device_config_ack("projectDir must be an absolute path")))
    assert refused == {
        "type": "device-config-ack",
        "success": False,
        "error": "projectDir must be an absolute path",
    }
