"""Fuzzing the relay client's frame parser.

The parser (:func:`~bridge.nostr.messages.parse_relay_message`) is total: any text or bytes
become one message or raise :class:`~bridge.nostr.messages.RelayMessageError`, nothing else; what
parses serializes back to a frame that parses to the same message.

The live connection under the same frames is fuzzed in
``tests/integration/nostr/test_frame_fuzz_connection.py``.

The seed corpus (``corpus/frames/*.json``) is replayed as explicit cases first.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from bridge.nostr.messages import (
    RelayMessageError,
    parse_relay_message,
    serialize_relay_message,
)
from tests.fuzz.corpus import FrameCase, frame_cases
from tests.fuzz.frame_strategies import frames

FUZZ = settings(max_examples=400, deadline=None)


@FUZZ
@given(frame=frames())
def test_parser_raises_only_relay_message_error(frame: str | bytes) -> None:
    try:
        message = parse_relay_message(frame)
    except RelayMessageError:
        return
    assert parse_relay_message(serialize_relay_message(message)) == message


@pytest.mark.parametrize("case", frame_cases(), ids=lambda c: c.name)
def test_corpus(case: FrameCase) -> None:
    if case.expect == "ok":
        message = parse_relay_message(case.frame)
        assert parse_relay_message(serialize_relay_message(message)) == message
    else:
        with pytest.raises(RelayMessageError) as caught:
            parse_relay_message(case.frame)
        assert len(str(caught.value)) < 200  # names the problem, never echoes the payload
