"""Kinds, expiry and tags (PROTOCOL.md §1, §3)."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.protocol import (
    CODEDECK_KINDS,
    COMMAND_EXPIRY_SECONDS,
    COMMAND_KIND,
    LIVE_KIND,
    RESPONSE_EXPIRY_SECONDS,
    RESPONSE_KIND,
    SESSION_LIST_KIND,
    BridgeToPhone,
    GsdStateMessage,
    InputAckMessage,
    InputCommand,
    OutputEntry,
    OutputMessage,
    PhoneToBridge,
    SessionsMessage,
    SyncBeginMessage,
    SyncChunkMessage,
    SyncEndMessage,
    UsageData,
    UsageMessage,
    command_tags,
    fragment_tags,
    kind_for,
    tags_for,
)
from bridge.protocol.shared import GsdState

from .strategies import model_strategy

PHONE = "a" * 64
BRIDGE = "b" * 64
NOW = 1_700_000_000
EXP = str(NOW + 3600)


def test_constants() -> None:
    assert (SESSION_LIST_KIND, LIVE_KIND, COMMAND_KIND, RESPONSE_KIND) == (30515, 24515, 4515, 4516)
    assert CODEDECK_KINDS == (30515, 4515, 4516, 24515)
    assert COMMAND_EXPIRY_SECONDS == RESPONSE_EXPIRY_SECONDS == 3600


EXPECTED_KIND = {"sessions": SESSION_LIST_KIND, "output": LIVE_KIND, "usage": LIVE_KIND}
EXPECTED_KIND["gsd-state"] = LIVE_KIND


@settings(max_examples=5, deadline=None)
@given(st.data())
def test_kind_of_every_message_type(data: st.DataObject) -> None:
    for cls in get_args(BridgeToPhone):
        message = data.draw(model_strategy(cls))
        assert kind_for(message) == EXPECTED_KIND.get(message.type, RESPONSE_KIND)
    for cls in get_args(PhoneToBridge):
        assert kind_for(data.draw(model_strategy(cls))) == COMMAND_KIND


ENTRY = OutputEntry(entryType="text", content="x", timestamp="t")
USAGE = UsageData(available=False, subscriptionType=None, fetchedAt="t")
GSD = GsdState(
    installed=False,
    available=False,
    hasGit=False,
    situation="",
    summary="",
    milestone=None,
    currentPhase=None,
    totalPhases=None,
    percent=0,
    phases=[],
    actions=[],
    recommended=None,
    paused=False,
    blockers=[],
    verifyFailed=False,
    execution=None,
)

TAG_CASES = [
    (
        SessionsMessage(machine="box", sessions=[], protocolVersion=10),
        [["p", PHONE], ["d", "box"]],
    ),
    (
        OutputMessage(sessionId="s1", seq=42, entry=ENTRY),
        [["p", PHONE], ["s", "s1"], ["seq", "42"]],
    ),
    (UsageMessage(sessionId="s1", usage=USAGE), [["p", PHONE]]),
    (GsdStateMessage(sessionId="s1", gsd=GSD), [["p", PHONE]]),
    (
        SyncBeginMessage(sessionId="s1", syncId="y", seqHigh=0, ranges=[]),
        [["p", PHONE], ["s", "s1"], ["expiration", EXP]],
    ),
    (
        SyncChunkMessage(sessionId="s1", syncId="y", range=(1, 2), entries=[]),
        [["p", PHONE], ["s", "s1"], ["expiration", EXP]],
    ),
    (
        SyncEndMessage(sessionId="s1", syncId="y", deliveredRanges=[]),
        [["p", PHONE], ["s", "s1"], ["expiration", EXP]],
    ),
    (InputAckMessage(sessionId="s1", inputId="i"), [["p", PHONE], ["expiration", EXP]]),
]


@pytest.mark.parametrize(("message", "tags"), TAG_CASES, ids=lambda v: getattr(v, "type", ""))
def test_tags_for(message: BridgeToPhone, tags: list[list[str]]) -> None:
    assert tags_for(message, PHONE, NOW) == tags


def test_heartbeat_d_tag_may_be_given() -> None:
    message = SessionsMessage(machine="box", sessions=[], protocolVersion=10)
    assert tags_for(message, PHONE, NOW, machine="other") == [["p", PHONE], ["d", "other"]]


def test_command_and_fragment_tags() -> None:
    assert command_tags(BRIDGE, NOW) == [["p", BRIDGE], ["expiration", EXP]]
    assert fragment_tags(RESPONSE_KIND, PHONE, NOW) == [["p", PHONE], ["expiration", EXP]]
    assert fragment_tags(COMMAND_KIND, BRIDGE, NOW) == [["p", BRIDGE], ["expiration", EXP]]
    assert fragment_tags(LIVE_KIND, PHONE, NOW) == [["p", PHONE]]


def test_a_heartbeat_is_never_fragmented() -> None:
    with pytest.raises(ValueError, match="never fragmented"):
        fragment_tags(SESSION_LIST_KIND, PHONE, NOW)
    with pytest.raises(ValueError, match="not a CodeDeck kind"):
        fragment_tags(1, PHONE, NOW)


@pytest.mark.parametrize("pubkey", ["", "A" * 64, "a" * 63, "g" * 64, "npub1xyz"])
def test_malformed_pubkeys_are_refused(pubkey: str) -> None:
    message = InputAckMessage(sessionId="s", inputId="i")
    with pytest.raises(ValueError, match="64 lowercase hex"):
        tags_for(message, pubkey, NOW)
    with pytest.raises(ValueError, match="64 lowercase hex"):
        command_tags(pubkey, NOW)


@pytest.mark.parametrize("created_at", [-1, True, 1.5, "1"])
def test_malformed_created_at_is_refused(created_at: object) -> None:
    with pytest.raises(ValueError, match="created_at"):
        command_tags(BRIDGE, created_at)  # type: ignore[arg-type]


def test_tags_for_refuses_a_command() -> None:
    with pytest.raises(ValueError, match="command_tags"):
        tags_for(InputCommand(sessionId="s", text="x"), PHONE, NOW)  # type: ignore[arg-type]
