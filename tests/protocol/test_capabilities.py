"""Capability strings and tiers (PROTOCOL.md §12)."""

from __future__ import annotations

from bridge.protocol import (
    ALL_BRIDGE_CAPABILITIES,
    ALL_PHONE_CAPABILITIES,
    CAPABILITIES,
    CAPABILITY_BY_NAME,
    OPENCODE,
    PROTOCOL_VERSION,
    PUSH,
    Tier,
    diff_allowed,
)


def test_the_ten_v10_strings_in_reference_order() -> None:
    assert ALL_BRIDGE_CAPABILITIES == (
        "sync/1",
        "folders",
        "gsd",
        "images",
        "device-actions",
        "usage",
        "models",
        "diff",
        "custom-providers",
        "chunked",
    )
    assert ALL_PHONE_CAPABILITIES == ("diff", "chunked")
    assert PROTOCOL_VERSION == 10


def test_tiers() -> None:
    hard = {c.name for c in CAPABILITIES if c.tier is Tier.HARD_GATE and not c.late_v10}
    beacon = {c.name for c in CAPABILITIES if c.tier is Tier.TRANSPORT_BEACON}
    assert hard == {"images", "diff", "custom-providers"}
    assert beacon == {"chunked"}
    markers = {c.name for c in CAPABILITIES if c.tier is Tier.PRESENCE_MARKER}
    assert markers == {"sync/1", "folders", "gsd", "device-actions", "usage", "models"}
    assert all(capability.note for capability in CAPABILITIES)


def test_opencode_is_late_v10_and_not_advertised() -> None:
    assert CAPABILITY_BY_NAME[OPENCODE].late_v10
    assert OPENCODE not in ALL_BRIDGE_CAPABILITIES
    assert [c.name for c in CAPABILITIES if c.late_v10] == [OPENCODE, PUSH]


def test_push_is_additive_and_a_phone_side_gate() -> None:
    assert CAPABILITY_BY_NAME[PUSH].tier is Tier.HARD_GATE
    assert PUSH not in ALL_BRIDGE_CAPABILITIES


def test_diff_gate() -> None:
    assert not diff_allowed({})  # nobody heard from yet
    assert diff_allowed({"a": ["diff", "chunked"]})
    assert diff_allowed({"a": ["diff"], "b": ("chunked", "diff")})
    assert not diff_allowed({"a": ["diff"], "b": []})  # one old phone turns it off for all
    assert not diff_allowed({"a": ["chunked"]})
