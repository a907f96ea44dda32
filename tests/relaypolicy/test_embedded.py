"""The in-process form (the daemon's embedded relay): the same decisions inside a real relay."""

from __future__ import annotations

import pytest

from relaypolicy import MemoryRegistry, RelayPolicy
from relaypolicy.embedded import EmbeddedPolicy
from relaypolicy.message import Decision, PolicyInput
from relaypolicy.policies import PolicyContext
from tests.relaypolicy.builders import NOW, PHONE, make_request


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
