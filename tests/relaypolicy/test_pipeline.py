"""The whole decision function: rule order, first non-accept wins, the line-level protocol."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from relaypolicy import DEFAULT_CONFIG, RelayPolicy, run_pipeline
from relaypolicy.message import ACCEPT, Action, Decision, PolicyInput
from relaypolicy.pipeline import DEFAULT_POLICIES, INTERNAL_ERROR
from relaypolicy.policies import PolicyContext
from relaypolicy.registry import MemoryRegistry
from tests.relaypolicy.builders import BRIDGE, NOW, PHONE, STRANGER, key, make_input, make_request


def make_policy(**kwargs: Any) -> RelayPolicy:
    return RelayPolicy(MemoryRegistry([BRIDGE, PHONE], {BRIDGE: NOW + 600}), **kwargs)


# (id, request overrides, action, msg)
CASES: list[tuple[str, dict[str, Any], Action, str]] = [
    ("phone-command", {}, Action.ACCEPT, ""),
    ("bridge-response", {"kind": 4516, "pubkey": BRIDGE}, Action.ACCEPT, ""),
    ("bridge-live", {"kind": 24515, "pubkey": BRIDGE}, Action.ACCEPT, ""),
    ("bridge-heartbeat", {"kind": 30515, "pubkey": BRIDGE}, Action.ACCEPT, ""),
    ("phone-dm-relays", {"kind": 10050, "tags": []}, Action.ACCEPT, ""),
    ("phone-kp-relays", {"kind": 10051, "tags": []}, Action.ACCEPT, ""),
    ("phone-key-package", {"kind": 30443, "tags": [["d", "a"]]}, Action.ACCEPT, ""),
    (
        "wrap-to-phone",
        {"kind": 1059, "pubkey": STRANGER, "tags": [["p", PHONE]]},
        Action.ACCEPT,
        "",
    ),
    ("group-message", {"kind": 445, "pubkey": STRANGER, "tags": [["h", "g"]]}, Action.ACCEPT, ""),
    ("pairing-request", {"pubkey": STRANGER}, Action.ACCEPT, ""),
    (
        "stranger-heartbeat",
        {"kind": 30515, "pubkey": STRANGER},
        Action.REJECT,
        "restricted: not a registered user",
    ),
    (
        "stranger-live",
        {"kind": 24515, "pubkey": STRANGER},
        Action.REJECT,
        "restricted: not a registered user",
    ),
    (
        "stranger-response",
        {"kind": 4516, "pubkey": STRANGER},
        Action.REJECT,
        "restricted: not a registered user",
    ),
    (
        "stranger-command-to-phone",
        {"pubkey": STRANGER, "tags": [["p", PHONE], ["expiration", str(NOW + 60)]]},
        Action.REJECT,
        "restricted: not a registered user",
    ),
    (
        "stranger-key-package",
        {"kind": 30443, "pubkey": STRANGER},
        Action.REJECT,
        "restricted: not a registered user",
    ),
    (
        "wrap-to-stranger",
        {"kind": 1059, "tags": [["p", STRANGER]]},
        Action.REJECT,
        "restricted: no registered recipient",
    ),
    (
        "text-note",
        {"kind": 1, "pubkey": BRIDGE},
        Action.REJECT,
        "blocked: kind 1 is not accepted on this private relay",
    ),
    (
        "bare-welcome",
        {"kind": 444, "pubkey": BRIDGE},
        Action.REJECT,
        "blocked: kind 444 is only accepted inside a gift wrap (kind 1059)",
    ),
    # Order: "what" before "who": a stranger's malformed command is told what is wrong with it.
    (
        "stranger-command-without-expiry",
        {"pubkey": STRANGER, "tags": [["p", PHONE]]},
        Action.REJECT,
        "invalid: kind 4515 needs a NIP-40 expiration tag",
    ),
    (
        "stranger-key-package-without-d",
        {"kind": 30443, "pubkey": STRANGER, "tags": []},
        Action.REJECT,
        "invalid: kind 30443 needs a d tag",
    ),
    (
        "expired-command",
        {"tags": [["p", BRIDGE], ["expiration", str(NOW - 1)]]},
        Action.REJECT,
        "invalid: event expired",
    ),
    (
        "command-expiring-too-late",
        {"tags": [["p", BRIDGE], ["expiration", str(NOW + 7200)]]},
        Action.REJECT,
        "invalid: expiration more than 3600 s ahead",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "action", "msg"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decision(overrides: dict[str, Any], action: Action, msg: str) -> None:
    assert make_policy().decide(make_input(**overrides)) == Decision(action, msg)


def test_every_rule_is_in_the_default_pipeline_once() -> None:
    names = [policy.__name__ for policy in DEFAULT_POLICIES]
    assert len(names) == len(set(names)) == 9
    # Rate limits run last, so only admitted events spend tokens.
    assert names[-4:] == ["pairing_rate", "gift_wrap_rate", "group_message_rate", "writer_rate"]


def test_first_non_accept_wins_and_later_rules_do_not_run() -> None:
    calls: list[str] = []

    def make(name: str, decision: Decision) -> Any:
        def policy(msg: PolicyInput, ctx: PolicyContext) -> Decision:
            calls.append(name)
            return decision

        policy.__name__ = name
        return policy

    ctx = make_policy().context
    rules = [
        make("a", ACCEPT),
        make("b", Decision(Action.ACCEPT)),
        make("c", Decision.reject("blocked", "c")),
        make("d", Decision.reject("blocked", "d")),
    ]
    assert run_pipeline(make_input(), ctx, rules) == Decision(Action.REJECT, "blocked: c")
    assert calls == ["a", "b", "c"]
    assert run_pipeline(make_input(), ctx, []) is ACCEPT


def test_rejected_events_spend_no_rate_tokens() -> None:
    policy = make_policy()
    for _ in range(50):  # blocked kinds and unregistered authors from one address
        assert not policy.decide(make_input(kind=1, pubkey=STRANGER)).accepted
        assert not policy.decide(make_input(kind=24515, pubkey=STRANGER)).accepted
    assert len(policy.context.limits) == 0
    results = [policy.decide(make_input(kind=445, pubkey=STRANGER)).accepted for _ in range(21)]
    assert results == [True] * 20 + [False]


def test_pairing_through_the_pipeline_is_rate_limited() -> None:
    policy = make_policy()
    results = [policy.decide(make_input(pubkey=key(i + 1))).accepted for i in range(11)]
    assert results == [True] * 10 + [False]
    # A registered phone from the same address is not affected by the pairing bucket.
    assert policy.decide(make_input(pubkey=PHONE)).accepted


def test_decide_request_reports_malformed_requests() -> None:
    policy = make_policy()
    request = make_request()
    event_id = request["event"]["id"]
    request["event"]["kind"] = "4515"
    assert policy.decide_request(request) == (
        event_id,
        Decision(Action.REJECT, "invalid: event.kind is not an integer in 0..65535"),
    )
    assert policy.decide_request([]) == (
        "",
        Decision(Action.REJECT, "invalid: request is not a JSON object"),
    )


def test_answer_line_round_trip() -> None:
    request = make_request(kind=1)
    answer = make_policy().answer_line(orjson.dumps(request) + b"\n")
    assert answer.error is None
    assert answer.line.endswith(b"\n") and answer.line.count(b"\n") == 1
    assert orjson.loads(answer.line) == {
        "id": request["event"]["id"],
        "action": "reject",
        "msg": "blocked: kind 1 is not accepted on this private relay",
    }


def test_answer_line_not_json_recovers_the_id() -> None:
    event_id = key(0xABC)
    line = b'{"type":"new","event":{"id":"' + event_id.encode() + b'","kind":1,'
    answer = make_policy().answer_line(line)
    assert orjson.loads(answer.line) == {
        "id": event_id,
        "action": "reject",
        "msg": "invalid: request is not valid JSON",
    }
    assert orjson.loads(make_policy().answer_line(b"\xff\xfe garbage").line)["id"] == ""


def test_a_failing_rule_answers_internal_error() -> None:
    def broken(msg: PolicyInput, ctx: PolicyContext) -> Decision:
        raise RuntimeError("boom")

    policy = RelayPolicy(MemoryRegistry(), DEFAULT_CONFIG, policies=[broken])
    request = make_request()
    answer = policy.answer_line(orjson.dumps(request))
    assert isinstance(answer.error, RuntimeError)
    assert answer.decision is INTERNAL_ERROR
    assert orjson.loads(answer.line) == {
        "id": request["event"]["id"],
        "action": "reject",
        "msg": "error: internal error",
    }
    # The policy object stays usable.
    assert policy.answer_line(orjson.dumps(make_request())).decision is INTERNAL_ERROR
