"""The engine's side of Web Push: the capability and key, the subscribe commands, the wake-ups.

A wake-up is read off the lines the engine commits; these tests drive the real paths that make
each kind of line (a card from the gate, a plan, a question, a turn's end, a dead session) and
check that exactly one ``WakePhones`` follows the commit that holds it, and none for anything
else.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.effects import (
    Commit,
    DeletePhone,
    DeletePushSubscription,
    DeletePushSubscriptions,
    Effect,
    PairedPhone,
    SavePushSubscription,
    TaskPolicy,
    WakePhones,
)
from bridge.engine.inputs import AgentEnded, AgentEntry, JournalRecord, PhoneUnpaired
from bridge.engine.phones.push import PUSH_ENDPOINT_ERROR, PUSH_OFF_ERROR
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, decrypt
from bridge.protocol import (
    PUSH,
    KeypressCommand,
    OutputEntry,
    PermissionResCommand,
    PushAckMessage,
    PushSubscribeCommand,
    PushUnsubscribeCommand,
    decode_phone_to_bridge,
)
from tests.engine.test_broker import QUESTIONS, request, send
from tests.engine.test_core import BRIDGE, NOW, PHONE, ROOT, ids, ready_session

PHONE_2 = Keypair.from_secret("44" * 32)
KEY = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
P256DH = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
AUTH = "BTBZMqHH6r4Tts7J_aSIgg"
ENDPOINT = "https://push.example.net/wpush/v2/gAAAAABk"
BOTH = tuple(sorted((PHONE.public_hex, PHONE_2.public_hex)))  # the audience, in its order


def engine_with(push_key: str | None = KEY) -> Engine:
    keys = ConversationKeyCache(BRIDGE.secret)
    counter = ids()
    phones = [
        PairedPhone(p.public_hex, p.npub, f"phone-{i}", "2026-01-01T00:00:00.000Z")
        for i, p in enumerate((PHONE, PHONE_2))
    ]
    config = EngineConfig(
        bridge_pubkey=BRIDGE.public_hex, machine="box", roots=(ROOT,), push_key=push_key
    )
    return Engine(
        config,
        EngineState(phones=phones),
        decrypt=lambda author, payload: decrypt(payload, keys.get(author)),
        new_id=lambda: next(counter),
        now=NOW,
    )


def subscribe(endpoint: str = ENDPOINT, p256dh: str = P256DH, auth: str = AUTH) -> Any:
    raw = {
        "type": "push-subscribe",
        "subscription": {
            "endpoint": endpoint,
            "expirationTime": None,
            "keys": {"p256dh": p256dh, "auth": auth},
        },
    }
    command = decode_phone_to_bridge(json.dumps(raw))
    assert isinstance(command, PushSubscribeCommand)
    return command


def acks(effects: list[Effect]) -> list[tuple[PushAckMessage, tuple[str, ...]]]:
    return [
        (p.message, p.audience)
        for e in effects
        if isinstance(e, Commit)
        for p in e.outbox
        if isinstance(p.message, PushAckMessage)
    ]


def wakes(effects: list[Effect]) -> list[WakePhones]:
    return [e for e in effects if isinstance(e, WakePhones)]


def ops(effects: list[Effect]) -> list[Any]:
    return [op for e in effects if isinstance(e, Commit) for op in e.ops]


# --- the capability and the key ------------------------------------------------------------


def test_the_heartbeat_advertises_push_with_its_key_exactly_when_push_is_on() -> None:
    on = engine_with().heartbeat_message()
    assert on.capabilities is not None and PUSH in on.capabilities
    assert on.pushKey == KEY
    off = engine_with(None).heartbeat_message()
    assert off.capabilities is not None and PUSH not in off.capabilities
    assert off.pushKey is None


# --- push-subscribe / push-unsubscribe ---------------------------------------------------


def test_a_subscription_is_kept_for_its_author_and_acked_to_it_only() -> None:
    effects = send(engine_with(), subscribe())
    [save] = [op for op in ops(effects) if isinstance(op, SavePushSubscription)]
    assert save == SavePushSubscription(PHONE.public_hex, ENDPOINT, P256DH, AUTH)
    assert acks(effects) == [(PushAckMessage(endpoint=ENDPOINT, success=True), (PHONE.public_hex,))]
    assert "BTBZ" not in repr(save)  # the auth secret stays out of repr


@pytest.mark.parametrize(
    ("endpoint", "p256dh", "auth", "error"),
    [
        ("http://push.example.net/x", P256DH, AUTH, PUSH_ENDPOINT_ERROR),
        ("ftp://push.example.net/x", P256DH, AUTH, PUSH_ENDPOINT_ERROR),
        ("http://0.0.0.0:8080/x", P256DH, AUTH, PUSH_ENDPOINT_ERROR),
        ("https://push.example.net/" + "a" * 2048, P256DH, AUTH, "Push endpoint is too long"),
        (ENDPOINT, "not-a-key", AUTH, "keys.p256dh must be a P-256 public key"),
        (ENDPOINT, KEY[:-4], AUTH, "keys.p256dh must be a P-256 public key"),
        (ENDPOINT, P256DH, "c2hvcnQ", "keys.auth must be 16 bytes"),
        (ENDPOINT, P256DH, "!!!!", "keys.auth must be 16 bytes"),
    ],
)
def test_a_broken_subscription_is_refused_with_its_reason(
    endpoint: str, p256dh: str, auth: str, error: str
) -> None:
    effects = send(engine_with(), subscribe(endpoint, p256dh, auth))
    assert not any(isinstance(op, SavePushSubscription) for op in ops(effects))
    [(ack, audience)] = acks(effects)
    assert (ack.success, audience) == (False, (PHONE.public_hex,))
    assert ack.error is not None and ack.error.startswith(error)


def test_http_to_this_machine_is_allowed_as_by_the_base_url_rule() -> None:
    for endpoint in ("http://127.0.0.1:8089/push/1", "http://localhost/p", "http://[::1]:9/p"):
        [(ack, _)] = acks(send(engine_with(), subscribe(endpoint)))
        assert ack.success, endpoint


def test_padded_and_standard_base64_keys_are_accepted() -> None:
    padded = subscribe(p256dh=P256DH + "=", auth=AUTH + "==")
    [(ack, _)] = acks(send(engine_with(), padded))
    assert ack.success


def test_with_push_off_a_subscription_is_refused() -> None:
    effects = send(engine_with(None), subscribe())
    assert not any(isinstance(op, SavePushSubscription) for op in ops(effects))
    [(ack, _)] = acks(effects)
    assert (ack.success, ack.error) == (False, PUSH_OFF_ERROR)


def test_unsubscribe_forgets_the_senders_own_subscription() -> None:
    effects = send(engine_with(), PushUnsubscribeCommand(endpoint=ENDPOINT))
    assert [op for op in ops(effects) if isinstance(op, DeletePushSubscription)] == [
        DeletePushSubscription(PHONE.public_hex, ENDPOINT)
    ]
    assert acks(effects) == [(PushAckMessage(endpoint=ENDPOINT, success=True), (PHONE.public_hex,))]


def test_unpairing_a_phone_forgets_its_subscriptions_in_the_same_commit() -> None:
    engine = engine_with()
    [commit, *_] = engine.handle(PhoneUnpaired(PHONE_2.public_hex), NOW)
    assert isinstance(commit, Commit)
    assert commit.ops == (
        DeletePhone(PHONE_2.public_hex),
        DeletePushSubscriptions(PHONE_2.public_hex),
    )


# --- wake-ups ----------------------------------------------------------------------------


def _after_its_commit(effects: list[Effect], wake: WakePhones) -> None:
    index = effects.index(wake)
    assert any(isinstance(e, Commit) for e in effects[:index]), "a wake-up before its commit"


def test_a_permission_card_wakes_every_phone_once_with_the_card() -> None:
    engine = engine_with()
    session = ready_session(engine)
    effects = request(engine, session, "tu-1", "Bash", {"command": "sudo apt install x"})
    assert wakes(effects) == [WakePhones("approval", BOTH, (session, "tu-1"))]
    _after_its_commit(effects, wakes(effects)[0])


def test_a_plan_to_approve_wakes_with_reason_plan() -> None:
    engine = engine_with()
    session = ready_session(engine)
    effects = request(engine, session, "tu-exit", "ExitPlanMode", {"plan": "1. do it"})
    assert wakes(effects) == [WakePhones("plan", BOTH, (session, "tu-exit"))]


def test_a_question_card_wakes_once_however_many_questions_it_asks() -> None:
    engine = engine_with()
    session = ready_session(engine)
    effects = request(engine, session, "tu-ask", "AskUserQuestion", {"questions": QUESTIONS})
    assert len(QUESTIONS) == 2
    assert wakes(effects) == [WakePhones("question", BOTH, (session, "tu-ask"))]


def test_answering_a_card_wakes_nobody() -> None:
    engine = engine_with()
    session = ready_session(engine)
    request(engine, session, "tu-1", "Bash", {"command": "sudo apt install x"})
    request(engine, session, "tu-exit", "ExitPlanMode", {"plan": "1. do it"})
    answered = send(engine, PermissionResCommand(sessionId=session, requestId="tu-1", allow=True))
    assert wakes(answered) == []
    keyed = send(engine, KeypressCommand(sessionId=session, key="2", context="plan-approval"))
    assert wakes(keyed) == []


def test_a_turns_end_and_a_dead_session_wake_without_a_card() -> None:
    engine = engine_with()
    session = ready_session(engine)
    end = OutputEntry(entryType="system", content="", timestamp="t", metadata={"stream_end": True})
    effects = engine.handle(AgentEntry(session, end), NOW)
    assert wakes(effects) == [WakePhones("turn-ended", BOTH, None)]
    died = engine.handle(AgentEnded(session, "killed"), NOW)
    assert wakes(died) == [WakePhones("session-died", BOTH, None)]


def test_ordinary_lines_wake_nobody() -> None:
    engine = engine_with()
    session = ready_session(engine)
    for entry in (
        OutputEntry(entryType="text", content="secret words", timestamp="t"),
        OutputEntry(entryType="system", content="x", timestamp="t", metadata={"subtype": "init"}),
        OutputEntry(entryType="system", content="", timestamp="t", metadata={"stream_end": 1}),
    ):
        assert wakes(engine.handle(AgentEntry(session, entry), NOW)) == []


def test_a_journal_record_wakes_once() -> None:
    engine = engine_with()
    session = ready_session(engine)
    end = OutputEntry(entryType="system", content="", timestamp="t", metadata={"stream_end": True})
    effects = engine.handle(JournalRecord(session, 1, AgentEntry(session, end)), NOW)
    assert wakes(effects) == [WakePhones("turn-ended", BOTH, None)]


def test_with_push_off_nothing_wakes() -> None:
    engine = engine_with(None)
    session = ready_session(engine)
    effects = request(engine, session, "tu-1", "Bash", {"command": "sudo apt install x"})
    assert wakes(effects) == []


def test_the_editors_task_sessions_wake_nobody() -> None:
    engine = engine_with()
    session = ready_session(engine)
    state = engine.sessions.get(session)
    assert state is not None
    engine.sessions.update(state, task=TaskPolicy(("read_file",), 10))
    end = OutputEntry(entryType="system", content="", timestamp="t", metadata={"stream_end": True})
    assert wakes(engine.handle(AgentEntry(session, end), NOW)) == []


def test_a_phone_with_nothing_paired_wakes_nobody() -> None:
    engine = engine_with()
    session = ready_session(engine)
    engine.handle(PhoneUnpaired(PHONE.public_hex), NOW)
    engine.handle(PhoneUnpaired(PHONE_2.public_hex), NOW)
    end = OutputEntry(entryType="system", content="", timestamp="t", metadata={"stream_end": True})
    effects = engine.handle(AgentEntry(session, end), NOW)
    assert wakes(effects) == []
