"""Fuzzing the decoders: whatever comes in, only ``DecodeError`` ever escapes.

And whatever decodes can be encoded again: the decoder never admits a value the encoder refuses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.protocol import (
    BRIDGE_TO_PHONE_TYPES,
    PHONE_TO_BRIDGE_TYPES,
    DecodeError,
    decode_bridge_to_phone,
    decode_phone_to_bridge,
    encode,
)

DECODERS = (decode_phone_to_bridge, decode_bridge_to_phone)
CORPUS = json.loads(
    (Path(__file__).parent.parent / "conformance" / "corpus.json").read_text(encoding="utf-8")
)
VALID = [*CORPUS["phoneToBridge"]["valid"], *CORPUS["bridgeToPhone"]["valid"]]
TYPES = sorted({*PHONE_TO_BRIDGE_TYPES, *BRIDGE_TO_PHONE_TYPES, "chunk", ""})
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(raw: Any) -> None:
    """Decode ``raw`` both ways; a success must survive encode → decode unchanged."""
    for decode in DECODERS:
        try:
            message = decode(raw)
        except DecodeError:
            continue
        assert decode(encode(message)) == message


awkward_numbers = st.sampled_from(
    [0, -0.0, 1.0, 1.5, -1, 2**53, 2**53 - 1, 2**63, 2**64, 2**64 + 1, -(2**63) - 1, 10**30, 1e308]
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    awkward_numbers,
    st.text(max_size=10),
    st.sampled_from(TYPES),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=8) | st.sampled_from(["type", "seq", "entry"]), children, max_size=4
        )
    ),
    max_leaves=20,
)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes(raw: bytes) -> None:
    check(raw)


@FUZZ
@given(st.text(max_size=200))
def test_random_text(raw: str) -> None:
    check(raw)


@FUZZ
@given(json_values)
def test_random_json(value: Any) -> None:
    check(dumps(value))


@FUZZ
@given(st.sampled_from(TYPES), st.dictionaries(st.text(max_size=12), json_values, max_size=8))
def test_random_objects_with_a_real_type(message_type: str, fields: dict[str, Any]) -> None:
    check(dumps({**fields, "type": message_type}))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            paths += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            paths += _paths(child, (*prefix, index))
    return paths


def _mutate(value: Any, path: tuple[Any, ...], action: str, replacement: Any) -> Any:
    if not path:
        return replacement
    copy = json.loads(json.dumps(value))
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "drop" and isinstance(parent, dict):
        del parent[last]
    elif action == "drop" and isinstance(parent, list):
        parent.pop(last)
    else:
        parent[last] = replacement
    return copy


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_valid_messages(data: st.DataObject) -> None:
    message = data.draw(st.sampled_from(VALID))
    path = data.draw(st.sampled_from(_paths(message)))
    action = data.draw(st.sampled_from(["drop", "replace"]))
    replacement = data.draw(json_values)
    check(dumps(_mutate(message, path, action, replacement)))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VALID), st.integers(min_value=0, max_value=400), st.binary(max_size=3))
def test_corrupted_valid_bytes(message: Any, position: int, junk: bytes) -> None:
    raw = dumps(message).encode()
    position = min(position, len(raw))
    check(raw[:position] + junk + raw[position + len(junk) :])


HOSTILE = [
    "[" * 100_000,
    "{" * 100_000,
    '{"a":' * 5000 + "1" + "}" * 5000,
    "1" * 100_000,
    "-" + "9" * 5000,
    "1e999999999",
    "0." + "0" * 10_000 + "1",
    '{"type":"output","sessionId":"s","seq":1e308,"entry":{}}',
    '{"type":"output","sessionId":"s","seq":' + "9" * 400 + ',"entry":{}}',
    '{"type":"sync-ack","syncId":"s","range":[' + "9" * 400 + ",1]}",
    '{"type":"output","sessionId":"s","seq":1,"entry":{"entryType":"text","content":"",'
    '"timestamp":"t","metadata":' + '{"a":' * 500 + "1" + "}" * 500 + "}}",
    '{"type":"output","sessionId":"s","seq":1,"entry":{"entryType":"text","content":"",'
    '"timestamp":"t","metadata":{"big":' + "9" * 40 + "}}}",
    '{"type":"input","sessionId":"s","text":"\\u0000\\ud83d\\ude00"}',
    '{"type":"input","sessionId":"s","text":"\\udc00"}',
    '{"type":"input","sessionId":"s","sessionId":5,"text":""}',
    '{"type":"input","type":"teleport"}',
    '{"type":"input"\x00}',
    "\ud800",
    b"\x00" * 100,
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b'{"type":"input","sessionId":"s","text":"\xff"}',
    bytearray(b'{"type":"models-request"}'),
    memoryview(b'{"type":"models-request"}'),
]


@pytest.mark.parametrize("raw", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_inputs(raw: Any) -> None:
    check(raw)
