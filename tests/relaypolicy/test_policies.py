"""Each rule on its own: fixture requests in, decisions out (strfry-policies' test style).

The clock is ``receivedAt``; the rate-limit state is a :class:`TokenBuckets` the test owns, so
every window boundary is exact.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from relaypolicy.config import DEFAULT_CONFIG, PolicyConfig, RateLimit
from relaypolicy.message import ACCEPT, Action, Decision
from relaypolicy.policies import (
    NOT_REGISTERED,
    Policy,
    PolicyContext,
    addressable_d_tag,
    allowed_kinds,
    command_expiration,
    gift_wrap_rate,
    gift_wrap_recipient,
    group_message_rate,
    pairing_rate,
    pairing_target,
    registered_author,
    writer_rate,
)
from relaypolicy.ratelimit import TokenBuckets
from relaypolicy.registry import MemoryRegistry
from tests.relaypolicy.builders import BRIDGE, NOW, PHONE, STRANGER, key, make_input

WINDOW_END = NOW + 600


def make_ctx(config: PolicyConfig = DEFAULT_CONFIG, *, window: bool = True) -> PolicyContext:
    registry = MemoryRegistry([BRIDGE, PHONE], {BRIDGE: WINDOW_END} if window else None)
    return PolicyContext(registry=registry, config=config, limits=TokenBuckets())


def reject(msg: str) -> Decision:
    return Decision(Action.REJECT, msg)


# (id, policy, request overrides, expected decision)
CASES: list[tuple[str, Policy, dict[str, Any], Decision]] = [
    # --- allowed_kinds --------------------------------------------------------------------------
    *[
        (f"kind-{kind}-allowed", allowed_kinds, {"kind": kind}, ACCEPT)
        for kind in (30515, 24515, 4515, 4516, 1059, 10050, 30443, 445, 10051)
    ],
    *[
        (
            f"kind-{kind}-blocked",
            allowed_kinds,
            {"kind": kind},
            reject(f"blocked: kind {kind} is not accepted on this private relay"),
        )
        for kind in (0, 1, 3, 4, 7, 443, 1984, 10002, 20000, 30023, 65535)
    ],
    (
        "bare-444-blocked",
        allowed_kinds,
        {"kind": 444},
        reject("blocked: kind 444 is only accepted inside a gift wrap (kind 1059)"),
    ),
    # --- command_expiration -----------------------------------------------------------------------
    ("4515-exp-plus-3600", command_expiration, {"tags": [["expiration", str(NOW + 3600)]]}, ACCEPT),
    ("4515-exp-plus-1", command_expiration, {"tags": [["expiration", str(NOW + 1)]]}, ACCEPT),
    (
        "4515-exp-plus-3720-clock-skew",
        command_expiration,
        {"tags": [["expiration", str(NOW + 3720)]]},
        ACCEPT,
    ),
    (
        "4515-exp-plus-3721",
        command_expiration,
        {"tags": [["expiration", str(NOW + 3721)]]},
        reject("invalid: expiration more than 3600 s ahead"),
    ),
    (
        "4515-exp-now-is-expired",
        command_expiration,
        {"tags": [["expiration", str(NOW)]]},
        reject("invalid: event expired"),
    ),
    (
        "4515-exp-past",
        command_expiration,
        {"tags": [["expiration", str(NOW - 30)]]},
        reject("invalid: event expired"),
    ),
    (
        "4515-no-exp",
        command_expiration,
        {"tags": [["p", BRIDGE]]},
        reject("invalid: kind 4515 needs a NIP-40 expiration tag"),
    ),
    (
        "4516-no-exp",
        command_expiration,
        {"kind": 4516, "tags": []},
        reject("invalid: kind 4516 needs a NIP-40 expiration tag"),
    ),
    (
        "4516-exp-too-far",
        command_expiration,
        {"kind": 4516, "tags": [["expiration", str(NOW + 86400)]]},
        reject("invalid: expiration more than 3600 s ahead"),
    ),
    *[
        (
            f"4515-exp-malformed-{i}",
            command_expiration,
            {"tags": [["expiration", value]]},
            reject("invalid: malformed expiration tag"),
        )
        for i, value in enumerate(["", "abc", "-5", "1e9", " 1700000100", "1700000100.5", "١٢٣"])
    ],
    (
        "4515-exp-tag-without-value",
        command_expiration,
        {"tags": [["expiration"]]},
        reject("invalid: kind 4515 needs a NIP-40 expiration tag"),
    ),
    (
        "4515-first-exp-tag-counts",
        command_expiration,
        {"tags": [["expiration", str(NOW + 60)], ["expiration", str(NOW + 99999)]]},
        ACCEPT,
    ),
    ("24515-no-exp-needed", command_expiration, {"kind": 24515, "tags": []}, ACCEPT),
    ("30515-no-exp-needed", command_expiration, {"kind": 30515, "tags": []}, ACCEPT),
    # --- addressable_d_tag ------------------------------------------------------------------------
    ("30443-with-d", addressable_d_tag, {"kind": 30443, "tags": [["d", "kp1"]]}, ACCEPT),
    ("30443-empty-d", addressable_d_tag, {"kind": 30443, "tags": [["d", ""]]}, ACCEPT),
    (
        "30443-without-d",
        addressable_d_tag,
        {"kind": 30443, "tags": [["e", key(1)]]},
        reject("invalid: kind 30443 needs a d tag"),
    ),
    (
        "30443-valueless-d",
        addressable_d_tag,
        {"kind": 30443, "tags": [["d"]]},
        reject("invalid: kind 30443 needs a d tag"),
    ),
    ("30515-without-d-not-this-rule", addressable_d_tag, {"kind": 30515, "tags": []}, ACCEPT),
    # --- registered_author ------------------------------------------------------------------------
    *[
        (f"registered-{kind}", registered_author, {"kind": kind, "pubkey": BRIDGE}, ACCEPT)
        for kind in (30515, 24515, 4515, 4516, 10050, 10051, 30443)
    ],
    *[
        (f"stranger-{kind}", registered_author, {"kind": kind, "pubkey": STRANGER}, NOT_REGISTERED)
        for kind in (30515, 24515, 4516, 10050, 10051, 30443)
    ],
    (
        "stranger-4515-into-open-window",
        registered_author,
        {"pubkey": STRANGER, "tags": [["p", BRIDGE]]},
        ACCEPT,
    ),
    (
        "stranger-4515-into-window-repeated-p",
        registered_author,
        {"pubkey": STRANGER, "tags": [["p", BRIDGE], ["p", BRIDGE]]},
        ACCEPT,
    ),
    (
        "stranger-4515-last-second-of-window",
        registered_author,
        {"pubkey": STRANGER, "received_at": WINDOW_END - 1},
        ACCEPT,
    ),
    (
        "stranger-4515-window-ended",
        registered_author,
        {"pubkey": STRANGER, "received_at": WINDOW_END},
        NOT_REGISTERED,
    ),
    (
        "stranger-4515-p-tags-bridge-and-another",
        registered_author,
        {"pubkey": STRANGER, "tags": [["p", BRIDGE], ["p", PHONE]]},
        NOT_REGISTERED,
    ),
    (
        "stranger-4515-to-bridge-without-window",
        registered_author,
        {"pubkey": STRANGER, "tags": [["p", PHONE]]},
        NOT_REGISTERED,
    ),
    (
        "stranger-4515-no-p",
        registered_author,
        {"pubkey": STRANGER, "tags": [["expiration", str(NOW + 60)]]},
        NOT_REGISTERED,
    ),
    (
        "stranger-4516-into-window-is-not-pairing",
        registered_author,
        {"kind": 4516, "pubkey": STRANGER, "tags": [["p", BRIDGE]]},
        NOT_REGISTERED,
    ),
    ("stranger-1059-not-this-rule", registered_author, {"kind": 1059, "pubkey": STRANGER}, ACCEPT),
    ("stranger-445-not-this-rule", registered_author, {"kind": 445, "pubkey": STRANGER}, ACCEPT),
    # --- gift_wrap_recipient ----------------------------------------------------------------------
    (
        "1059-to-registered",
        gift_wrap_recipient,
        {"kind": 1059, "pubkey": STRANGER, "tags": [["p", PHONE]]},
        ACCEPT,
    ),
    (
        "1059-one-of-several-registered",
        gift_wrap_recipient,
        {"kind": 1059, "pubkey": STRANGER, "tags": [["p", key(7)], ["p", BRIDGE]]},
        ACCEPT,
    ),
    (
        "1059-to-stranger",
        gift_wrap_recipient,
        {"kind": 1059, "pubkey": PHONE, "tags": [["p", STRANGER]]},
        reject("restricted: no registered recipient"),
    ),
    (
        "1059-without-p",
        gift_wrap_recipient,
        {"kind": 1059, "pubkey": PHONE, "tags": []},
        reject("restricted: no registered recipient"),
    ),
    (
        "1059-registered-only-in-other-tag",
        gift_wrap_recipient,
        {"kind": 1059, "tags": [["e", PHONE], ["P", PHONE]]},
        reject("restricted: no registered recipient"),
    ),
    ("4515-not-this-rule", gift_wrap_recipient, {"tags": []}, ACCEPT),
]


@pytest.mark.parametrize(
    ("policy", "overrides", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_rule(policy: Policy, overrides: dict[str, Any], expected: Decision) -> None:
    assert policy(make_input(**overrides), make_ctx()) == expected


def test_accept_is_the_shared_constant() -> None:
    """The pipeline relies on rules returning the ACCEPT object itself."""
    ctx = make_ctx()
    for policy in (allowed_kinds, command_expiration, addressable_d_tag, registered_author):
        assert policy(make_input(pubkey=BRIDGE), ctx) is ACCEPT


def test_expiry_limit_and_clock_slack_are_configurable() -> None:
    ctx = make_ctx(replace(DEFAULT_CONFIG, max_command_expiry_seconds=600, clock_skew_seconds=0))
    ok = make_input(tags=[["expiration", str(NOW + 600)]])
    too_far = make_input(tags=[["expiration", str(NOW + 601)]])
    assert command_expiration(ok, ctx) is ACCEPT
    assert command_expiration(too_far, ctx) == reject("invalid: expiration more than 600 s ahead")
    slack = make_ctx(replace(DEFAULT_CONFIG, max_command_expiry_seconds=600, clock_skew_seconds=30))
    assert command_expiration(make_input(tags=[["expiration", str(NOW + 630)]]), slack) is ACCEPT
    assert command_expiration(make_input(tags=[["expiration", str(NOW + 631)]]), slack) != ACCEPT


def test_pairing_target_names_the_bridge() -> None:
    ctx = make_ctx()
    assert pairing_target(make_input(pubkey=STRANGER), ctx) == BRIDGE
    assert pairing_target(make_input(kind=445, pubkey=STRANGER), ctx) is None
    assert pairing_target(make_input(pubkey=STRANGER), make_ctx(window=False)) is None


def test_pairing_window_follows_the_registry() -> None:
    ctx = make_ctx(window=False)
    registry = ctx.registry
    assert isinstance(registry, MemoryRegistry)
    msg = make_input(pubkey=STRANGER)
    assert registered_author(msg, ctx) == NOT_REGISTERED
    registry.open_pairing_window(BRIDGE, NOW + 1)
    assert registered_author(msg, ctx) is ACCEPT
    registry.close_pairing_window(BRIDGE)
    assert registered_author(msg, ctx) == NOT_REGISTERED
    registry.open_pairing_window(BRIDGE, NOW + 1)
    registry.unregister(BRIDGE)
    assert registered_author(msg, ctx) == NOT_REGISTERED


# --- rate limits: the clock is receivedAt ------------------------------------------------------


def _run(policy: Policy, ctx: PolicyContext, n: int, **overrides: Any) -> list[bool]:
    return [policy(make_input(**overrides), ctx).accepted for _ in range(n)]


def test_group_messages_burst_of_20_then_limited() -> None:
    ctx = make_ctx()
    results = _run(group_message_rate, ctx, 25, kind=445, pubkey=STRANGER)
    assert results == [True] * 20 + [False] * 5
    limited = group_message_rate(make_input(kind=445, pubkey=key(99)), ctx)
    assert limited == reject("rate-limited: too many group messages from this address")


def test_group_messages_refill_one_per_second() -> None:
    ctx = make_ctx()
    assert all(_run(group_message_rate, ctx, 20, kind=445))
    assert _run(group_message_rate, ctx, 1, kind=445) == [False]
    assert _run(group_message_rate, ctx, 2, kind=445, received_at=NOW + 1) == [True, False]
    assert _run(group_message_rate, ctx, 4, kind=445, received_at=NOW + 4) == [True] * 3 + [False]
    # A long pause refills to the burst, not beyond it.
    after = _run(group_message_rate, ctx, 21, kind=445, received_at=NOW + 3600)
    assert after == [True] * 20 + [False]


def test_group_message_buckets_are_per_address() -> None:
    ctx = make_ctx()
    assert all(_run(group_message_rate, ctx, 20, kind=445, source_info="198.51.100.1"))
    assert _run(group_message_rate, ctx, 1, kind=445, source_info="198.51.100.1") == [False]
    assert _run(group_message_rate, ctx, 1, kind=445, source_info="198.51.100.2") == [True]


def test_group_message_ipv6_shares_a_bucket_per_64() -> None:
    ctx = make_ctx()
    for i in range(20):
        info = f"2001:db8:1:2::{i + 1:x}"
        assert _run(group_message_rate, ctx, 1, kind=445, source_type="IP6", source_info=info)[0]
    same_64 = {"kind": 445, "source_type": "IP6", "source_info": "2001:db8:1:2:ffff::1"}
    other_64 = {"kind": 445, "source_type": "IP6", "source_info": "2001:db8:1:3::1"}
    assert _run(group_message_rate, ctx, 1, **same_64) == [False]
    assert _run(group_message_rate, ctx, 1, **other_64) == [True]


def test_group_messages_custom_limit_and_disabled() -> None:
    ctx = make_ctx(replace(DEFAULT_CONFIG, group_message_per_ip=RateLimit(2, 0.0)))
    assert _run(group_message_rate, ctx, 3, kind=445) == [True, True, False]
    # per_second 0: never refills.
    assert _run(group_message_rate, ctx, 1, kind=445, received_at=NOW + 10**6) == [False]
    off = make_ctx(replace(DEFAULT_CONFIG, group_message_per_ip=None))
    assert all(_run(group_message_rate, off, 100, kind=445))


@pytest.mark.parametrize("source_type", ["Import", "Stream", "Sync", "Stored", "Bogus"])
def test_group_messages_without_client_address_are_not_ip_limited(source_type: str) -> None:
    ctx = make_ctx()
    results = _run(group_message_rate, ctx, 50, kind=445, source_type=source_type, source_info="")
    assert all(results)


def test_group_message_rule_ignores_other_kinds() -> None:
    ctx = make_ctx()
    assert all(_run(group_message_rate, ctx, 50, kind=1059))
    assert len(ctx.limits) == 0


def test_pairing_requests_limited_per_address() -> None:
    ctx = make_ctx()
    results = _run(pairing_rate, ctx, 12, pubkey=STRANGER)
    assert results == [True] * 10 + [False] * 2
    assert pairing_rate(make_input(pubkey=STRANGER), ctx) == reject(
        "rate-limited: too many pairing requests from this address"
    )
    # 0.2/s: one more token after 5 s, not after 4.
    assert _run(pairing_rate, ctx, 1, pubkey=STRANGER, received_at=NOW + 4) == [False]
    assert _run(pairing_rate, ctx, 2, pubkey=STRANGER, received_at=NOW + 5) == [True, False]
    assert _run(pairing_rate, ctx, 1, pubkey=STRANGER, source_info="198.51.100.9") == [True]


def test_pairing_limit_skips_registered_authors_and_other_kinds() -> None:
    ctx = make_ctx()
    assert all(_run(pairing_rate, ctx, 30, pubkey=PHONE))
    assert all(_run(pairing_rate, ctx, 30, kind=4516, pubkey=STRANGER))
    assert len(ctx.limits) == 0


def test_gift_wraps_limited_per_address() -> None:
    ctx = make_ctx()
    results = _run(gift_wrap_rate, ctx, 32, kind=1059, pubkey=STRANGER)
    assert results == [True] * 30 + [False] * 2
    assert gift_wrap_rate(make_input(kind=1059), ctx) == reject(
        "rate-limited: too many gift wraps from this address"
    )
    assert _run(gift_wrap_rate, ctx, 2, kind=1059, received_at=NOW + 2) == [True, False]


def test_writers_limited_per_pubkey() -> None:
    config = replace(DEFAULT_CONFIG, writer_per_pubkey=RateLimit(3, 1.0))
    ctx = make_ctx(config)
    assert _run(writer_rate, ctx, 4, kind=24515, pubkey=PHONE) == [True, True, True, False]
    assert writer_rate(make_input(kind=24515, pubkey=PHONE), ctx) == reject(
        "rate-limited: too many events from this pubkey"
    )
    # Per pubkey, whatever the address: a second IP does not help the same key.
    assert _run(writer_rate, ctx, 1, pubkey=PHONE, source_info="198.51.100.3") == [False]
    assert _run(writer_rate, ctx, 1, pubkey=BRIDGE) == [True]
    assert _run(writer_rate, ctx, 2, pubkey=PHONE, received_at=NOW + 1) == [True, False]


def test_writer_limit_default_and_exemptions() -> None:
    ctx = make_ctx()
    assert _run(writer_rate, ctx, 3001, kind=24515, pubkey=BRIDGE) == [True] * 3000 + [False]
    # Unregistered authors are never counted here (their own rules apply).
    assert all(_run(writer_rate, ctx, 400, kind=445, pubkey=STRANGER))
    # Operator imports/syncs are not limited.
    assert all(_run(writer_rate, ctx, 10, pubkey=BRIDGE, source_type="Import", source_info=""))
    off = make_ctx(replace(DEFAULT_CONFIG, writer_per_pubkey=None))
    assert all(_run(writer_rate, off, 400, pubkey=BRIDGE))
