"""Decode and encode rules of the codec (PROTOCOL.md §5, PROTOCOL-v10-wire.md §2)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from bridge.protocol import (
    BRIDGE_TO_PHONE_TYPES,
    KEEP,
    MAX_JSON_DEPTH,
    MAX_MESSAGE_BYTES,
    PHONE_TO_BRIDGE_TYPES,
    CreateSessionCommand,
    DecodeError,
    EncodeError,
    InputCommand,
    OutputEntry,
    OutputMessage,
    ProviderProfileWrite,
    RemoteSessionInfo,
    SessionsMessage,
    SetCredentialsCommand,
    SetProviderProfileCommand,
    SyncAckCommand,
    UploadImageBlossomCommand,
    UploadImageChunkedCommand,
    UsageData,
    UsageMessage,
    UsageWindow,
    decode_as,
    decode_bridge_to_phone,
    decode_phone_to_bridge,
    encode,
)
from bridge.protocol.shared import ModelEntry

S = "sess-1"
TS = "2026-03-01T12:00:00Z"


def p2b(**fields: Any) -> str:
    return json.dumps(fields)


def entry(**over: Any) -> dict[str, Any]:
    return {"entryType": "text", "content": "x", "timestamp": TS, **over}


def output(**entry_over: Any) -> str:
    return json.dumps({"type": "output", "sessionId": S, "seq": 1, "entry": entry(**entry_over)})


def nest(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


# --- decoding -----------------------------------------------------------------------------------

INVALID_JSON = [
    pytest.param("", id="empty"),
    pytest.param("{", id="truncated"),
    pytest.param("nope", id="bare-word"),
    pytest.param('{"type":"input","text":NaN}', id="nan"),
    pytest.param('{"type":"input","seq":Infinity}', id="infinity"),
    pytest.param('{"type":"input","x":1e999}', id="overflowing-number"),
    pytest.param('{"type":"input","text":"\\ud800"}', id="lone-surrogate-escape"),
    pytest.param(b"\xff\xfe{}", id="not-utf8"),
    pytest.param(b'\xef\xbb\xbf{"type":"input"}', id="bom"),
    pytest.param("[" * 2000 + "]" * 2000, id="nesting-past-parser-limit"),
    pytest.param("{'type': 'input'}", id="python-literal"),
]


@pytest.mark.parametrize("raw", INVALID_JSON)
def test_invalid_json_is_a_decode_error_with_the_parser_message(raw: str | bytes) -> None:
    for decode in (decode_phone_to_bridge, decode_bridge_to_phone):
        with pytest.raises(DecodeError, match=r"^invalid JSON: ") as caught:
            decode(raw)
        assert caught.value.message_type is None
        assert caught.value.path is None


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(DecodeError, ValueError)
    assert issubclass(EncodeError, ValueError)


def test_decode_accepts_str_bytes_bytearray_and_memoryview() -> None:
    text = '{"type":"refresh-sessions"}'
    for raw in (text, text.encode(), bytearray(text.encode()), memoryview(text.encode())):
        assert decode_phone_to_bridge(raw).type == "refresh-sessions"  # type: ignore[arg-type]


@pytest.mark.parametrize("raw", [None, 42, 1.5, ["{}"], {"type": "input"}])
def test_decode_of_a_non_text_input_is_a_decode_error(raw: Any) -> None:
    with pytest.raises(DecodeError, match=r"^invalid JSON: expected str or bytes, got "):
        decode_phone_to_bridge(raw)


def test_decode_refuses_input_over_the_size_cap_before_parsing() -> None:
    big = '{"type":"input","sessionId":"s","text":"' + "x" * MAX_MESSAGE_BYTES + '"}'
    with pytest.raises(DecodeError, match="larger than 16777216 bytes"):
        decode_phone_to_bridge(big)
    with pytest.raises(DecodeError, match="larger than 16777216 bytes"):
        decode_phone_to_bridge(big.encode())
    # Under the cap in code points but over it in UTF-8 bytes.
    wide = '{"type":"input","sessionId":"s","text":"' + "é" * (MAX_MESSAGE_BYTES // 2) + '"}'
    with pytest.raises(DecodeError, match="larger than"):
        decode_phone_to_bridge(wide)


def test_a_large_reassembled_message_decodes() -> None:
    text = "y" * 200_000
    decoded = decode_bridge_to_phone(output(content=text))
    assert isinstance(decoded, OutputMessage)
    assert decoded.entry.content == text


MISMATCHES = [
    ("[]", '"<missing>": (root) expected object'),
    ('"input"', '"<missing>": (root) expected object'),
    ("null", '"<missing>": (root) expected object'),
    ('{"sessionId":"s"}', '"<missing>": type is required'),
    ('{"type":null}', '"<missing>": type expected string'),
    ('{"type":["input"]}', '"<missing>": type expected string'),
    ('{"type":"teleport"}', '"teleport": type unknown message type'),
    ('{"type":"INPUT"}', '"INPUT": type unknown message type'),
    ('{"type":"a\\"b\\nc"}', '"a\\"b\\nc": type unknown message type'),
    ('{"type":"' + "t" * 100 + '"}', '"' + "t" * 64 + '...": type unknown message type'),
]


@pytest.mark.parametrize(("raw", "text"), MISMATCHES)
def test_envelope_errors(raw: str, text: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_phone_to_bridge(raw)
    assert str(caught.value) == f"schema mismatch for type {text}"


def test_error_attributes_name_the_type_and_path() -> None:
    with pytest.raises(DecodeError) as caught:
        decode_bridge_to_phone(output(entryType="image"))
    assert caught.value.message_type == "output"
    assert caught.value.path == "entry.entryType"


def test_the_first_issue_is_reported_in_wire_key_order() -> None:
    # Both `sessionId` and `v` are wrong; `v` is declared first but written last on the wire.
    with pytest.raises(DecodeError, match=r"sessionId must not be empty$"):
        decode_phone_to_bridge(p2b(type="input", sessionId="", text="x", v=0))
    with pytest.raises(DecodeError, match=r"text is required$"):
        decode_phone_to_bridge(p2b(type="input", sessionId="s", caps=[1]))


def test_error_texts_never_contain_input_values() -> None:
    secret = "sk-ant-very-secret-value"
    cases = [
        p2b(type="set-credentials", anthropicApiKey=[secret]),
        p2b(
            type="set-provider-profile",
            profileId="p",
            profile={"label": "l", "baseUrl": f"http://{secret}", "authToken": secret},
        ),
        p2b(type="pair-request", npub="n", pubkeyHex="p", label=1, token=secret),
        p2b(type="mode", sessionId="s", mode=secret),
    ]
    for raw in cases:
        with pytest.raises(DecodeError) as caught:
            decode_phone_to_bridge(raw)
        assert secret not in str(caught.value)
        assert secret not in repr(caught.value)


def test_unknown_fields_are_stripped_at_every_level() -> None:
    raw = json.dumps(
        {
            "type": "sessions",
            "machine": "m",
            "rev": 3,
            "sessions": [
                {
                    "id": "a",
                    "slug": "a",
                    "cwd": "/",
                    "lastActivity": TS,
                    "lineCount": 0,
                    "title": None,
                    "project": "p",
                    "mode": "build",
                }
            ],
            "protocolVersion": 10,
        }
    )
    decoded = decode_bridge_to_phone(raw)
    assert isinstance(decoded, SessionsMessage)
    assert decoded.model_extra is None
    text = encode(decoded)
    assert "rev" not in text
    assert '"mode"' not in text


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1), (1.0, 1), (0.0, 0), (-0.0, 0), (2.0**53 - 1, 2**53 - 1), (1e2, 100)],
)
def test_an_int_is_a_json_number_with_an_integral_value(value: float, expected: int) -> None:
    decoded = decode_bridge_to_phone(
        json.dumps({"type": "output", "sessionId": S, "seq": value, "entry": entry()})
    )
    assert isinstance(decoded, OutputMessage)
    assert decoded.seq == expected
    assert type(decoded.seq) is int
    assert f'"seq":{expected},' in encode(decoded)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "expected integer"),
        (False, "expected integer"),
        ("1", "expected integer"),
        (1.5, "expected integer"),
        (None, "expected integer"),
        ([1], "expected integer"),
        (-1, "must be >= 0"),
        (2**53, "must be <= 9007199254740991"),
        (2**64, "must be <= 9007199254740991"),
        (10**30, "must be <= 9007199254740991"),  # parsed as an (integral) float
    ],
)
def test_int_rules(value: Any, message: str) -> None:
    raw = json.dumps({"type": "output", "sessionId": S, "seq": value, "entry": entry()})
    with pytest.raises(DecodeError) as caught:
        decode_bridge_to_phone(raw)
    assert str(caught.value).endswith(f"seq {message}")


def test_numbers_keep_fractions_and_write_integral_values_without_one() -> None:
    window = '{"utilization":%s,"resetsAt":null}'
    for literal, expected in [("12.5", "12.5"), ("50.0", "50"), ("0", "0"), ("1e-7", "1e-7")]:
        raw = (
            '{"type":"usage","sessionId":"s","usage":{"available":true,"subscriptionType":null,'
            f'"fiveHour":{window % literal},"fetchedAt":"t"}}}}'
        )
        decoded = decode_bridge_to_phone(raw)
        assert f'"utilization":{expected},' in encode(decoded)
    with pytest.raises(DecodeError, match=r"utilization expected number$"):
        decode_bridge_to_phone(raw.replace('"utilization":1e-7', '"utilization":true'))


def test_context_percentage_bounds_are_inclusive() -> None:
    base = {"id": "a", "slug": "a", "cwd": "/", "lastActivity": TS, "lineCount": 0}
    base |= {"title": None, "project": "p"}
    for ok in (0, 100, 99.5):
        RemoteSessionInfo(**base, contextPercentage=ok)
    for bad in (-0.01, 100.01):
        raw = json.dumps(
            {
                "type": "session-ready",
                "pendingId": "a",
                "session": base | {"contextPercentage": bad},
            }
        )
        with pytest.raises(DecodeError, match=r"must be between 0 and 100$"):
            decode_bridge_to_phone(raw)


def test_null_in_an_optional_field_is_rejected_on_the_wire_but_absent_is_fine() -> None:
    with pytest.raises(DecodeError, match=r"inputId must not be null \(omit the key instead\)$"):
        decode_phone_to_bridge(p2b(type="input", sessionId="s", text="x", inputId=None))
    decoded = decode_phone_to_bridge(p2b(type="input", sessionId="s", text="x"))
    assert isinstance(decoded, InputCommand)
    assert decoded.inputId is None


def test_tri_state_fields_tell_absent_from_null_from_value() -> None:
    absent = decode_phone_to_bridge(p2b(type="set-credentials"))
    cleared = decode_phone_to_bridge(p2b(type="set-credentials", anthropicApiKey=None))
    stored = decode_phone_to_bridge(p2b(type="set-credentials", anthropicApiKey="sk"))
    assert isinstance(absent, SetCredentialsCommand)
    assert isinstance(cleared, SetCredentialsCommand)
    assert isinstance(stored, SetCredentialsCommand)
    assert absent.anthropicApiKey is KEEP
    assert cleared.anthropicApiKey is None
    assert stored.anthropicApiKey == "sk"
    assert absent != cleared
    assert encode(absent) == '{"type":"set-credentials"}'
    assert encode(cleared) == '{"type":"set-credentials","anthropicApiKey":null}'
    assert encode(stored) == '{"type":"set-credentials","anthropicApiKey":"sk"}'


def test_provider_token_tri_state_round_trips() -> None:
    base = {"label": "l", "baseUrl": "https://x.example", "models": [{"id": "m"}]}
    for profile, token in [
        (base, KEEP),
        (base | {"authToken": None}, None),
        (base | {"authToken": "t"}, "t"),
    ]:
        decoded = decode_phone_to_bridge(
            p2b(type="set-provider-profile", profileId="p", profile=profile)
        )
        assert isinstance(decoded, SetProviderProfileCommand)
        assert decoded.profile is not None
        assert decoded.profile.authToken == token
        assert decode_phone_to_bridge(encode(decoded)) == decoded


def test_upload_image_tries_blossom_first_then_chunked() -> None:
    blossom = {
        "sessionId": S,
        "hash": "h",
        "url": "https://b.example/x",
        "key": "k",
        "iv": "i",
        "filename": "f.png",
        "mimeType": "image/png",
        "text": "",
        "sizeBytes": 10,
    }
    chunked = {
        "sessionId": S,
        "uploadId": "u",
        "filename": "f.png",
        "mimeType": "image/png",
        "base64Data": "AA==",
        "text": "",
        "chunkIndex": 0,
        "totalChunks": 2,
    }
    assert (
        type(decode_phone_to_bridge(p2b(type="upload-image", **blossom)))
        is UploadImageBlossomCommand
    )
    assert (
        type(decode_phone_to_bridge(p2b(type="upload-image", **chunked)))
        is UploadImageChunkedCommand
    )
    # Both shapes complete: the first member of the union wins, and the other keys are stripped.
    both = decode_phone_to_bridge(p2b(type="upload-image", **(blossom | chunked)))
    assert type(both) is UploadImageBlossomCommand
    assert "uploadId" not in encode(both)


def test_metadata_is_free_form_json_with_a_depth_limit() -> None:
    metadata = {"tool_input": {"a": [1, 2.5, None, True, "s", {"b": []}]}, "n": 2**64 - 1}
    decoded = decode_bridge_to_phone(output(metadata=metadata))
    assert isinstance(decoded, OutputMessage)
    assert decoded.entry.metadata == metadata
    decode_bridge_to_phone(output(metadata=nest(MAX_JSON_DEPTH)))
    with pytest.raises(DecodeError, match=r"entry.metadata nests deeper than 64 levels$"):
        decode_bridge_to_phone(output(metadata=nest(MAX_JSON_DEPTH + 1)))


def test_decode_as_reads_one_model() -> None:
    assert decode_as(OutputEntry, json.dumps(entry())) == OutputEntry(**entry())
    with pytest.raises(
        DecodeError, match=r'^schema mismatch for type "OutputEntry": content is required$'
    ):
        decode_as(OutputEntry, '{"entryType":"text","timestamp":"t"}')
    with pytest.raises(DecodeError, match=r'"input": type expected "sync-ack"$'):
        decode_as(SyncAckCommand, p2b(type="input", sessionId="s", text="x"))
    assert decode_as(SyncAckCommand, p2b(type="sync-ack", syncId="s", range=[1, 2])).range == (1, 2)


def test_registries_map_every_type_to_its_classes() -> None:
    assert len(PHONE_TO_BRIDGE_TYPES) == 25  # v10's 23, then push-subscribe, push-unsubscribe
    assert len(BRIDGE_TO_PHONE_TYPES) == 25  # v10's 24, then push-ack
    assert PHONE_TO_BRIDGE_TYPES["upload-image"] == (
        UploadImageBlossomCommand,
        UploadImageChunkedCommand,
    )
    assert not set(PHONE_TO_BRIDGE_TYPES) & set(BRIDGE_TO_PHONE_TYPES)
    for literal, classes in {**PHONE_TO_BRIDGE_TYPES, **BRIDGE_TO_PHONE_TYPES}.items():
        for cls in classes:
            assert cls.model_fields["type"].default == literal


# --- encoding -----------------------------------------------------------------------------------


def test_encode_writes_compact_json_in_declaration_order() -> None:
    message = InputCommand(sessionId="s", text="hé 😀", inputId="i", v=10, caps=["diff"])
    assert encode(message) == (
        '{"type":"input","sessionId":"s","text":"hé 😀","inputId":"i","v":10,"caps":["diff"]}'
    )


def test_encode_omits_absent_optionals_and_writes_declared_nulls() -> None:
    usage = UsageMessage(
        sessionId="s",
        usage=UsageData(
            available=False,
            subscriptionType=None,
            fiveHour=UsageWindow(utilization=None, resetsAt=None),
            fetchedAt=TS,
        ),
    )
    assert encode(usage) == (
        '{"type":"usage","sessionId":"s","usage":{"available":false,"subscriptionType":null,'
        '"fiveHour":{"utilization":null,"resetsAt":null},"fetchedAt":"' + TS + '"}}'
    )
    assert encode(CreateSessionCommand()) == '{"type":"create-session"}'
    assert (
        encode(CreateSessionCommand(model=None, cwd="app"))
        == '{"type":"create-session","cwd":"app"}'
    )


def test_encode_of_a_mapping_validates_it_like_a_decoder() -> None:
    assert encode({"type": "input", "sessionId": "s", "text": "x", "extra": 1}) == (
        '{"type":"input","sessionId":"s","text":"x"}'
    )
    assert encode({"type": "models", "models": []}) == '{"type":"models","models":[]}'
    with pytest.raises(EncodeError, match=r'"input": sessionId is required$'):
        encode({"type": "input", "text": "x"})
    with pytest.raises(EncodeError, match=r'"warp": type unknown message type$'):
        encode({"type": "warp"})
    with pytest.raises(EncodeError, match=r'"<missing>": type is required$'):
        encode({"text": "x"})


def test_an_insecure_base_url_fails_at_the_sender() -> None:
    profile = {"label": "l", "baseUrl": "http://evil.example", "models": [{"id": "m"}]}
    with pytest.raises(EncodeError) as caught:
        encode({"type": "set-provider-profile", "profileId": "p", "profile": profile})
    assert str(caught.value) == (
        'schema mismatch for type "set-provider-profile": profile.baseUrl Base URL must be '
        "https:// (http:// is allowed only for localhost, 127.0.0.1 or [::1])"
    )
    with pytest.raises(ValueError, match="Base URL must be https://"):
        ProviderProfileWrite(label="l", baseUrl="http://evil.example", models=[ModelEntry(id="m")])


def test_egress_validation_catches_what_construction_skipped() -> None:
    bad = OutputEntry.model_construct(entryType="image", content="x", timestamp=TS)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match=r'"OutputEntry": entryType must be one of'):
        encode(bad)
    missing = OutputEntry.model_construct(entryType="text", timestamp=TS)  # type: ignore[call-arg]
    with pytest.raises(EncodeError, match=r'"OutputEntry": content is required$'):
        encode(missing)
    insecure = ProviderProfileWrite.model_construct(
        label="l", baseUrl="http://evil.example", authToken=KEEP, models=[ModelEntry(id="m")]
    )
    command = SetProviderProfileCommand(profileId="p", profile=insecure)
    with pytest.raises(EncodeError, match=r"profile.baseUrl Base URL must be https://"):
        encode(command)


def test_egress_validation_checks_mutated_metadata() -> None:
    message = OutputMessage(sessionId="s", seq=1, entry=OutputEntry(**entry(metadata={"a": 1})))
    assert message.entry.metadata is not None
    message.entry.metadata["when"] = object()  # frozen models cannot stop nested mutation
    with pytest.raises(EncodeError, match=r'"output": entry.metadata must hold JSON values only'):
        encode(message)
    message.entry.metadata["when"] = float("nan")
    with pytest.raises(EncodeError, match="must hold JSON values only"):
        encode(message)
    message.entry.metadata["when"] = 2**64
    with pytest.raises(EncodeError, match="must hold JSON values only"):
        encode(message)
    message.entry.metadata["when"] = {1: "int key"}
    with pytest.raises(EncodeError, match="must hold JSON values only"):
        encode(message)
    message.entry.metadata["when"] = nest(MAX_JSON_DEPTH)
    with pytest.raises(EncodeError, match="nests deeper than 64 levels"):
        encode(message)


def test_encode_refuses_text_that_is_not_valid_unicode() -> None:
    with pytest.raises(EncodeError, match=r"^cannot serialize: "):
        encode(InputCommand(sessionId="s", text="\ud800"))


def test_encode_refuses_other_objects() -> None:
    with pytest.raises(EncodeError, match="expected a model or a mapping"):
        encode(["input"])  # type: ignore[arg-type]


def test_encoded_text_is_what_orjson_would_write() -> None:
    message = OutputMessage(sessionId="s", seq=3, entry=OutputEntry(**entry(content='a"\\\n\x01')))
    text = encode(message)
    assert text == orjson.dumps(orjson.loads(text)).decode()
    assert json.loads(text)["entry"]["content"] == 'a"\\\n\x01'
