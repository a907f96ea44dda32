"""The models as Python code uses them: construction, immutability, secrets kept out of reprs."""

from __future__ import annotations

from typing import get_args

import pydantic
import pytest

from bridge.protocol import (
    KEEP,
    BridgeToPhone,
    Command,
    InputCommand,
    OutputEntry,
    PairRequestCommand,
    PhoneToBridge,
    ProviderProfileWrite,
    SetCredentialsCommand,
    SetProviderProfileCommand,
    UploadImageBlossomCommand,
    UploadImageChunkedCommand,
    WireModel,
)
from bridge.protocol.shared import ModelEntry


def test_the_type_literal_is_filled_in() -> None:
    assert InputCommand(sessionId="s", text="x").type == "input"
    for cls in (*get_args(PhoneToBridge), *get_args(BridgeToPhone)):
        assert cls.model_fields["type"].default is not None


def test_every_command_has_the_version_envelope_and_no_message_does() -> None:
    for cls in get_args(PhoneToBridge):
        assert issubclass(cls, Command)
        assert [name for name, _, _ in cls.__wire_plan__][-2:] == ["v", "caps"]
        assert cls.__wire_plan__[0][0] == "type"
    for cls in get_args(BridgeToPhone):
        assert not issubclass(cls, Command)
        assert "v" not in cls.model_fields
        assert cls.__wire_plan__[0][0] == "type"


def test_python_code_may_pass_none_for_an_absent_optional() -> None:
    assert InputCommand(sessionId="s", text="x", inputId=None) == InputCommand(
        sessionId="s", text="x"
    )


def test_models_are_frozen() -> None:
    command = InputCommand(sessionId="s", text="x")
    with pytest.raises(pydantic.ValidationError):
        command.text = "y"  # type: ignore[misc]


def test_construction_validates_strictly() -> None:
    with pytest.raises(pydantic.ValidationError):
        InputCommand(sessionId="s", text=1)
    with pytest.raises(pydantic.ValidationError):
        OutputEntry(entryType="text", content="x", timestamp="t", metadata={"a": {1, 2}})


def test_secrets_stay_out_of_repr_and_str() -> None:
    secrets = {
        "api": "sk-ant-secret-0001",
        "pat": "ghp_secret0002",
        "token": "provider-secret-0003",
        "pair": "0123456789abcdef0123456789abcdef",
        "key": "aes-key-secret-0004",
    }
    models: list[WireModel] = [
        SetCredentialsCommand(anthropicApiKey=secrets["api"], githubPat=secrets["pat"]),
        SetProviderProfileCommand(
            profileId="p",
            profile=ProviderProfileWrite(
                label="l",
                baseUrl="https://x.example",
                authToken=secrets["token"],
                models=[ModelEntry(id="m")],
            ),
        ),
        PairRequestCommand(npub="n", pubkeyHex="p", label="l", token=secrets["pair"]),
        UploadImageBlossomCommand(
            sessionId="s",
            hash="h",
            url="https://b",
            key=secrets["key"],
            iv="i",
            filename="f",
            mimeType="m",
            text="",
            sizeBytes=1,
        ),
    ]
    for model in models:
        for shown in (repr(model), str(model)):
            for secret in secrets.values():
                assert secret not in shown


def test_construction_errors_do_not_echo_input() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        ProviderProfileWrite(
            label="l", baseUrl="http://leaky.example", authToken="", models=[ModelEntry(id="m")]
        )
    assert "leaky" not in str(caught.value)


def test_keep_is_a_distinct_sentinel() -> None:
    assert repr(KEEP) == "KEEP"
    assert KEEP is not None
    assert SetCredentialsCommand().githubPat is KEEP
    assert SetCredentialsCommand(githubPat=None).githubPat is None


def test_upload_image_shapes_share_the_type() -> None:
    assert UploadImageBlossomCommand.model_fields["type"].default == "upload-image"
    assert UploadImageChunkedCommand.model_fields["type"].default == "upload-image"
