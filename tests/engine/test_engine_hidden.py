"""The engine and the hidden paths of its config: sessions never start in one, tools never name one.

A ``create-session`` whose cwd can never work ends in ``session-failed`` with the reason: the
engine refuses what it can tell without the disk (a NUL byte, a path too long for any filesystem,
a folder inside a hidden path) before any runner starts; the runtime fails the rest
(``tests/runtime/test_runners.py``). Either way the phone reads why, and no session is left
``starting``. A tool call that names a hidden path is blocked by the session's broker, which
takes the list from :class:`EngineConfig`.
"""

from __future__ import annotations

import pytest

from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.effects import AnswerPermission, Commit, PairedPhone, StartRunner
from bridge.engine.inputs import AgentFailed, AgentReady, PermissionRequested
from bridge.engine.sessions.rules import MAX_CWD_LENGTH, PENDING_STATE, session_cwd_problem
from bridge.nostr.nip44 import ConversationKeyCache, decrypt
from bridge.protocol import CreateSessionCommand, SessionFailedMessage
from tests.engine.test_core import BRIDGE, NOW, PHONE, command_event, make_engine, published

HOME = "/home/u"
SECRETS = (f"{HOME}/.codedeck", f"{HOME}/.ssh")


def home_engine() -> Engine:
    """An engine with the bridge's defaults: the home as the root, its secrets hidden."""
    keys = ConversationKeyCache(BRIDGE.secret)
    return Engine(
        EngineConfig(
            bridge_pubkey=BRIDGE.public_hex,
            machine="box",
            roots=(HOME,),
            home=HOME,
            secrets=SECRETS,
        ),
        EngineState(
            phones=[PairedPhone(PHONE.public_hex, PHONE.npub, "phone", "2026-01-01T00:00:00.000Z")]
        ),
        decrypt=lambda author, payload: decrypt(payload, keys.get(author)),
        new_id=lambda: "id-0001",
        now=NOW,
    )


def failure_reason(engine: Engine, cwd: str) -> str:
    """The reason of the ``session-failed`` that must follow ``session-pending`` at once."""
    effects = engine.handle(command_event(CreateSessionCommand(cwd=cwd)), NOW)
    assert not any(isinstance(e, StartRunner) for e in effects)
    assert published(effects) == [
        ("session-pending", (PHONE.public_hex,)),
        ("session-failed", (PHONE.public_hex,)),
    ]
    assert engine.session("id-0001") is None  # nothing left "starting"
    return next(
        p.message.reason
        for e in effects
        if isinstance(e, Commit)
        for p in e.outbox
        if isinstance(p.message, SessionFailedMessage)
    )


@pytest.mark.parametrize(
    ("cwd", "words"),
    [
        ("proj\x00x", "NUL byte"),
        ("/home/u/" + "a" * 5000, "too long"),
        ("/home/u/" + "b" * 300, "longer than 255 bytes"),
        (f"{HOME}/.codedeck", "hidden from agents"),
        (f"{HOME}/.codedeck/sub", "hidden from agents"),
        ("~/.ssh", "hidden from agents"),
        (".ssh/x", "hidden from agents"),
        ("proj/../.codedeck", "hidden from agents"),
    ],
)
def test_a_cwd_that_can_never_work_fails_at_once(cwd: str, words: str) -> None:
    reason = failure_reason(home_engine(), cwd)
    assert words in reason
    assert len(reason) < 300  # a 5,000-character path is not echoed whole


@pytest.mark.parametrize("cwd", ["", "proj", "/home/u/proj", "~/proj", "/elsewhere", "../x"])
def test_other_cwds_reach_the_runtime(cwd: str) -> None:
    """What exists and lies inside a root is the runtime's to tell (symlinks resolved)."""
    assert session_cwd_problem(cwd, (HOME,), HOME, SECRETS) is None


def test_the_length_limit_is_the_systems() -> None:
    assert session_cwd_problem("/a" * (MAX_CWD_LENGTH // 2), (HOME,), HOME, ()) is None
    assert session_cwd_problem("/a" * (MAX_CWD_LENGTH // 2 + 1), (HOME,), HOME, ()) is not None


def test_a_failure_reported_by_the_runtime_fails_the_pending_session() -> None:
    """The runtime's half: a cwd the engine let through and the disk refused."""
    engine = make_engine()
    effects = engine.handle(command_event(CreateSessionCommand(cwd="missing")), NOW)
    start = effects[-1]
    assert isinstance(start, StartRunner)
    assert start.record.state == PENDING_STATE
    failed = engine.handle(AgentFailed(start.record.session_id, "missing does not exist"), NOW)
    assert published(failed) == [("session-failed", (PHONE.public_hex,))]
    assert engine.session(start.record.session_id) is None


def test_the_broker_blocks_a_tool_call_naming_a_hidden_path() -> None:
    engine = home_engine()
    effects = engine.handle(command_event(CreateSessionCommand(cwd="proj")), NOW)
    start = next(e for e in effects if isinstance(e, StartRunner))
    session = start.record.session_id
    engine.handle(AgentReady(session, "sdk-1", "m", f"{HOME}/proj"), NOW)
    read_key = PermissionRequested(session, "tu-1", "Read", {"file_path": "~/.ssh/id_ed25519"})
    [answer] = [e for e in engine.handle(read_key, NOW) if isinstance(e, AnswerPermission)]
    assert not answer.allow and "deny_list:secret_path" in answer.message
    read_notes = PermissionRequested(session, "tu-2", "Read", {"file_path": "~/notes.txt"})
    [answer] = [e for e in engine.handle(read_notes, NOW) if isinstance(e, AnswerPermission)]
    assert answer.allow  # the home is still the workspace for everything else
