"""Property: every valid message survives ``decode(encode(m)) == m``, for every model of both unions.

The messages are generated from the models' declarations (tests/protocol/strategies.py), so the
property covers optional fields absent and present, nullable fields null, tri-state fields in all
three states, boundary integers and arbitrary Unicode text.
"""

from __future__ import annotations

from typing import get_args

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.protocol import (
    BridgeToPhone,
    PhoneToBridge,
    WireModel,
    decode_as,
    decode_bridge_to_phone,
    decode_phone_to_bridge,
    encode,
)
from bridge.protocol.shared import OutputEntry, RemoteSessionInfo

from .strategies import model_strategy

PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("cls", get_args(PhoneToBridge), ids=lambda cls: cls.__name__)
def test_commands_round_trip(cls: type[WireModel]) -> None:
    @PROPERTY
    @given(model_strategy(cls))
    def check(message: WireModel) -> None:
        text = encode(message)
        decoded = decode_phone_to_bridge(text)
        assert type(decoded) is cls
        assert decoded == message
        assert encode(decoded) == text  # the wire form is stable, too

    check()


@pytest.mark.parametrize("cls", get_args(BridgeToPhone), ids=lambda cls: cls.__name__)
def test_messages_round_trip(cls: type[WireModel]) -> None:
    @PROPERTY
    @given(model_strategy(cls))
    def check(message: WireModel) -> None:
        text = encode(message)
        decoded = decode_bridge_to_phone(text)
        assert type(decoded) is cls
        assert decoded == message
        assert encode(decoded) == text

    check()


@pytest.mark.parametrize("cls", [OutputEntry, RemoteSessionInfo], ids=lambda cls: cls.__name__)
def test_shared_types_round_trip_through_decode_as(cls: type[WireModel]) -> None:
    @PROPERTY
    @given(model_strategy(cls))
    def check(model: WireModel) -> None:
        assert decode_as(cls, encode(model)) == model

    check()


@settings(max_examples=50, deadline=None)
@given(st.one_of(*(model_strategy(cls) for cls in get_args(BridgeToPhone))))
def test_encoding_is_compact_and_writes_no_null_for_absent_optionals(message: WireModel) -> None:
    text = encode(message)
    assert text == orjson.dumps(orjson.loads(text)).decode()  # compact, no extra whitespace
    wire = orjson.loads(text)
    assert next(iter(wire)) == "type"
