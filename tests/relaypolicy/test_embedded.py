"""The in-process form (the daemon's embedded relay): the same decisions inside a real relay."""

from __future__ import annotations

from typing import Any

import pytest

from relaypolicy import MemoryRegistry, RelayPolicy
from relaypolicy.embedded import EmbeddedPolicy, embedded_policy
from relaypolicy.message import Decision, PolicyInput
from relaypolicy.policies import PolicyContext
from tests.relaypolicy.builders import BRIDGE, NOW, PHONE, STRANGER, key, make_request


def test_admit_uses_the_clock_as_received_at() -> None:
    hook = EmbeddedPolicy(RelayPolicy(MemoryRegistry([PHONE])), clock=lambda: NOW + 0.9)
    event = make_request()["event"]  # expiration = NOW + 3600
    assert hook.admit(event, "127.0.0.1") == (True, "")
    late = EmbeddedPolicy(
        RelayPolicy(MemoryRegistry([PHONE])), clock=lambda: NOW - 121
    )  # beyond the 120 s clock slack
    assert late.admit(event, "127.0.0.1") == (False, "invalid: expiration more than 3600 s ahead")


def test_ipv6_sources_share_a_bucket_per_64() -> None:
    policy = RelayPolicy(MemoryRegistry())
    hook = EmbeddedPolicy(policy, clock=lambda: NOW)
    for i in range(20):
        assert hook.admit(make_request(kind=445)["event"], f"2001:db8::{i + 1}")[0]
    assert hook.admit(make_request(kind=445)["event"], "2001:db8::ff") == (
        False,
        "rate-limited: too many group messages from this address",
    )


def test_admit_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    def broken(msg: PolicyInput, ctx: PolicyContext) -> Decision:
        raise RuntimeError("boom")

    hook = EmbeddedPolicy(RelayPolicy(MemoryRegistry(), policies=[broken]))
    assert hook.admit(make_request()["event"], "127.0.0.1") == (False, "error: internal error")
    assert hook.admit({"id": 5}, "127.0.0.1") == (
        False,
        "invalid: event.id is not 64 lowercase hex characters",
    )
    assert "write policy failed" in caplog.text


# --- the embedded relay's own rules ---------------------------------------------------------

STRANGER_KINDS = [1, 5, 444, 445, 1059, 10050, 10051, 30443]
"""Kinds the deployed relay takes (some from anyone) that the embedded relay refuses."""


def decide(registry: MemoryRegistry, *, source: str = "192.0.2.9", **request: Any) -> str:
    """The embedded policy's OK message for one event ("" when accepted)."""
    hook = embedded_policy(registry, clock=lambda: NOW)
    accepted, message = hook.admit(make_request(**request)["event"], source)
    assert accepted is (message == "")
    return message


@pytest.mark.parametrize("kind", [30515, 24515, 4515, 4516])
def test_the_bridge_and_its_phones_write_the_codedeck_kinds(kind: int) -> None:
    registry = MemoryRegistry([BRIDGE, PHONE])
    assert decide(registry, kind=kind, pubkey=BRIDGE) == ""
    assert decide(registry, kind=kind, pubkey=PHONE) == ""
    assert decide(registry, kind=kind, pubkey=STRANGER) == "restricted: not a registered user"


@pytest.mark.parametrize("kind", STRANGER_KINDS)
def test_no_other_kind_from_anyone(kind: int) -> None:
    registry = MemoryRegistry([BRIDGE, PHONE], windows={BRIDGE: NOW + 600})
    tags = [["p", PHONE], ["h", "group"], ["d", "x"]]
    expected = f"blocked: kind {kind} is not accepted on this bridge's relay"
    for author in (STRANGER, PHONE, BRIDGE):
        assert decide(registry, kind=kind, pubkey=author, tags=tags) == expected
    # The deployed relay's rules take the anonymous ones (445, and 1059 to a registered p).
    deployed = EmbeddedPolicy(RelayPolicy(registry), clock=lambda: NOW)
    if kind in (445, 1059):
        assert deployed.admit(make_request(kind=kind, pubkey=STRANGER, tags=tags)["event"], "x")[0]


def test_a_new_phone_pairs_only_to_the_bridge_while_the_window_is_open() -> None:
    registry = MemoryRegistry([BRIDGE, PHONE])
    to_bridge = [["p", BRIDGE], ["expiration", str(NOW + 3600)]]
    assert decide(registry, pubkey=STRANGER, tags=to_bridge) == "restricted: not a registered user"
    registry.open_pairing_window(BRIDGE, NOW + 600)
    assert decide(registry, pubkey=STRANGER, tags=to_bridge) == ""
    to_phone = [["p", PHONE], ["expiration", str(NOW + 3600)]]
    assert decide(registry, pubkey=STRANGER, tags=to_phone) == "restricted: not a registered user"
    to_both = [*to_bridge, ["p", PHONE]]
    assert decide(registry, pubkey=STRANGER, tags=to_both) == "restricted: not a registered user"
    live = decide(registry, kind=24515, pubkey=STRANGER, tags=[["p", BRIDGE]])
    assert live == "restricted: not a registered user"  # only 4515 rides the window
    registry.open_pairing_window(BRIDGE, NOW)  # the window ends at NOW (exclusive)
    assert decide(registry, pubkey=STRANGER, tags=to_bridge) == "restricted: not a registered user"


def test_pairing_strangers_are_rate_limited_per_address() -> None:
    registry = MemoryRegistry([BRIDGE], windows={BRIDGE: NOW + 600})
    hook = embedded_policy(registry, clock=lambda: NOW)
    tags = [["p", BRIDGE], ["expiration", str(NOW + 3600)]]
    outcomes = [
        hook.admit(make_request(pubkey=key(0x5000 + n), tags=tags)["event"], "192.0.2.9")
        for n in range(12)
    ]
    assert (
        outcomes
        == [(True, "")] * 10
        + [(False, "rate-limited: too many pairing requests from this address")] * 2
    )
    # A paired phone's burst is not limited (no per-writer limit on the embedded relay).
    registry.register(PHONE)
    assert all(hook.admit(make_request(pubkey=PHONE)["event"], "192.0.2.9")[0] for _ in range(3100))


def test_commands_and_responses_still_expire_within_the_hour() -> None:
    registry = MemoryRegistry([BRIDGE, PHONE])
    forever = [["p", BRIDGE]]
    assert decide(registry, kind=4516, pubkey=BRIDGE, tags=forever) == (
        "invalid: kind 4516 needs a NIP-40 expiration tag"
    )
