"""The policy configuration: defaults, the TOML file, and clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relaypolicy.config import (
    DEFAULT_CONFIG,
    ConfigError,
    PolicyConfig,
    RateLimit,
    load_config,
    parse_config,
)

DEPLOY_CONFIG = Path(__file__).parents[2] / "deploy" / "relay" / "relaypolicy.toml"


def test_defaults() -> None:
    assert DEFAULT_CONFIG.max_command_expiry_seconds == 3600
    assert DEFAULT_CONFIG.group_message_per_ip == RateLimit(20, 1.0)
    assert DEFAULT_CONFIG.pairing_per_ip == RateLimit(10, 0.2)
    assert DEFAULT_CONFIG.gift_wrap_per_ip == RateLimit(30, 0.5)
    assert DEFAULT_CONFIG.writer_per_pubkey == RateLimit(3000, 300.0)
    assert load_config(None) is DEFAULT_CONFIG
    assert parse_config({}) == DEFAULT_CONFIG


def test_parse_overrides_and_partial_tables() -> None:
    config = parse_config(
        {
            "max_command_expiry_seconds": 600,
            "max_tracked_keys": 10,
            "rate_limits": {
                "group_message_per_ip": {"burst": 5},
                "writer_per_pubkey": {"per_second": 2},
                "gift_wrap_per_ip": {"enabled": False},
            },
        }
    )
    assert config == PolicyConfig(
        max_command_expiry_seconds=600,
        max_tracked_keys=10,
        group_message_per_ip=RateLimit(5, 1.0),
        pairing_per_ip=RateLimit(10, 0.2),
        gift_wrap_per_ip=None,
        writer_per_pubkey=RateLimit(3000, 2),
    )


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("unknown-top", {"rate_limit": {}}, "unknown key(s) rate_limit"),
    (
        "unknown-limit",
        {"rate_limits": {"per_ip": {}}},
        "rate_limits: unknown limit(s) per_ip (known: group_message_per_ip, pairing_per_ip, "
        "gift_wrap_per_ip, writer_per_pubkey)",
    ),
    (
        "unknown-limit-key",
        {"rate_limits": {"pairing_per_ip": {"rate": 1}}},
        "rate_limits.pairing_per_ip: unknown key(s) rate",
    ),
    ("limits-not-table", {"rate_limits": 5}, "rate_limits must be a table"),
    (
        "limit-not-table",
        {"rate_limits": {"pairing_per_ip": 5}},
        "rate_limits.pairing_per_ip must be a table",
    ),
    (
        "burst-zero",
        {"rate_limits": {"pairing_per_ip": {"burst": 0}}},
        "rate_limits.pairing_per_ip: burst must be an integer >= 1, got 0",
    ),
    (
        "burst-float",
        {"rate_limits": {"pairing_per_ip": {"burst": 1.5}}},
        "rate_limits.pairing_per_ip: burst must be an integer >= 1, got 1.5",
    ),
    (
        "rate-negative",
        {"rate_limits": {"pairing_per_ip": {"per_second": -1}}},
        "rate_limits.pairing_per_ip: per_second must be a number >= 0, got -1",
    ),
    (
        "rate-str",
        {"rate_limits": {"pairing_per_ip": {"per_second": "1"}}},
        "rate_limits.pairing_per_ip: per_second must be a number >= 0, got '1'",
    ),
    (
        "enabled-str",
        {"rate_limits": {"pairing_per_ip": {"enabled": "no"}}},
        "rate_limits.pairing_per_ip.enabled must be true or false",
    ),
    (
        "expiry-zero",
        {"max_command_expiry_seconds": 0},
        "max_command_expiry_seconds must be an integer >= 1, got 0",
    ),
    ("keys-bool", {"max_tracked_keys": True}, "max_tracked_keys must be an integer >= 1, got True"),
]


@pytest.mark.parametrize(("raw", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_invalid(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert str(caught.value) == message


def test_load_config_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("[rate_limits.group_message_per_ip]\nburst = 3\nper_second = 0.5\n")
    assert load_config(path).group_message_per_ip == RateLimit(3, 0.5)


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=f"cannot read config file {missing}"):
        load_config(missing)
    broken = tmp_path / "broken.toml"
    broken.write_text("rate_limits = [")
    with pytest.raises(ConfigError, match=f"config file {broken} is not valid TOML"):
        load_config(broken)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("max_tracked_keys = -1\n")
    with pytest.raises(ConfigError, match=f"config file {wrong}: max_tracked_keys must be"):
        load_config(wrong)


def test_the_shipped_deployment_config_is_the_documented_defaults() -> None:
    """deploy/relay/relaypolicy.toml spells the defaults out; it must load and agree."""
    assert load_config(DEPLOY_CONFIG) == DEFAULT_CONFIG
