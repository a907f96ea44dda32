"""RunnerManager: starting runners, the exactly-once inbox hand-off, crash reconciliation, close."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from bridge.agents.base import RunnerError
from bridge.engine.effects import AnswerPermission, SessionRecord
from bridge.engine.inputs import AgentFailed, AgentOptionSet, Input
from bridge.protocol import ModelEntry
from bridge.runtime.hosts.runners import RunnerManager
from store import bridge_state
from store.db import BridgeDatabase
from tests.runtime.support import FakeAgents, finished, rows, session_record

T = 1_800_000_000


@dataclass
class Rig:
    db: BridgeDatabase
    root: Path
    agents: FakeAgents
    fed: list[Input]
    manager: RunnerManager

    async def started(
        self, record: SessionRecord, *, resume: bool = False, create: bool = False
    ) -> None:
        self.manager.start(record, resume=resume, create_cwd=create)
        await finished(self.manager)

    async def delivered(self, session_id: str = "s-1") -> None:
        self.manager.deliver(session_id)
        await finished(self.manager)

    async def inbox(self, session_id: str = "s-1") -> list[tuple[str, str]]:
        return [
            (str(uid), str(state))
            for uid, state in await rows(
                self.db,
                "SELECT uid, state FROM inbox WHERE session_id = ? ORDER BY rowid",
                [session_id],
            )
        ]


def make_rig(
    db: BridgeDatabase,
    tmp_path: Path,
    agents: FakeAgents | None = None,
    env: dict[str, str] | str | None = None,
    hidden: tuple[str, ...] = (),
) -> Rig:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    agents = agents or FakeAgents()
    fed: list[Input] = []
    manager = RunnerManager(
        agents.factory,
        db,
        [root],
        fed.append,
        env_for=None if env is None else (lambda record: env),
        hidden=hidden,
    )
    return Rig(db, root, agents, fed, manager)


async def add_inbox(
    db: BridgeDatabase, *uids: str, session_id: str = "s-1", state: str = "pending"
) -> None:
    for uid in uids:
        await bridge_state.add_inbox(db, uid, session_id, f"text of {uid}", None, T)
        if state == "sent":
            await bridge_state.mark_inbox_sent(db, uid)


# --- start ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CwdCase:
    id: str
    requested: str
    create: bool
    resume: bool
    cwd: str | None
    """Relative to the root; None: the start fails with `reason`."""
    reason: str = ""


BAD_CWD_CASES = [
    CwdCase(
        "nul-byte",
        "a\x00b",
        False,
        False,
        None,
        "cannot use a\x00b as a folder: embedded null byte",
    ),
    CwdCase(
        "nul-byte-created",
        "a\x00b",
        True,
        False,
        None,
        "cannot use a\x00b as a folder: embedded null byte",
    ),
    CwdCase("name-too-long", "x" * 5000, True, False, None, "File name too long"),
    CwdCase("resume-nul-byte", "{root}/a\x00b", False, True, None, "no longer exists"),
    CwdCase("resume-hidden", "{root}/secret", False, True, None, "is hidden from agents"),
    CwdCase("hidden", "{root}/secret", False, False, None, "is hidden from agents"),
    CwdCase("hidden-below", "secret/sub", True, False, None, "is hidden from agents"),
    CwdCase("hidden-through-a-link", "link/sub", True, False, None, "is hidden from agents"),
]


@pytest.mark.parametrize("case", BAD_CWD_CASES, ids=[c.id for c in BAD_CWD_CASES])
async def test_a_cwd_the_system_or_the_sandbox_refuses_fails_the_session(
    db: BridgeDatabase, tmp_path: Path, case: CwdCase
) -> None:
    root = tmp_path / "ws"
    rig = make_rig(db, tmp_path, hidden=(str(root / "secret"),))
    (root / "secret").mkdir()
    (root / "link").symlink_to(root / "secret")
    await rig.started(
        session_record("s-1", case.requested.format(root=root)),
        resume=case.resume,
        create=case.create,
    )
    [failed] = rig.fed
    assert isinstance(failed, AgentFailed) and failed.session_id == "s-1"
    assert case.reason.format(root=root) in failed.reason
    assert len(failed.reason) < 300  # a 5,000-character request is not echoed whole
    assert rig.agents.made == []
    assert list((root / "secret").iterdir()) == []  # nothing was created inside it


async def test_env_for_refusing_fails_the_session_without_a_runner(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    rig = make_rig(db, tmp_path, env="the provider profile kimi was deleted")
    await rig.started(session_record("s-1"))
    assert rig.fed == [AgentFailed("s-1", "the provider profile kimi was deleted")]
    assert rig.agents.made == []
    assert rig.manager.running == 0


async def test_a_runner_whose_start_raises_fails_the_session(
    db: BridgeDatabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(db, tmp_path)
    rig.agents.script.start_error = RuntimeError("no such binary")
    await rig.started(session_record("s-1"))
    assert rig.fed == [AgentFailed("s-1", "the agent could not start: no such binary")]
    assert "! runner s-1 failed to start" in caplog.messages
    # Forgotten: a later start makes a new runner, a delivery finds none.
    await add_inbox(db, "u-1")
    await rig.delivered()
    assert await rig.inbox() == [("u-1", "pending")]
    rig.agents.script.start_error = None
    await rig.started(session_record("s-1"))
    assert len(rig.agents.made) == 2


async def test_a_factory_that_raises_fails_the_session(db: BridgeDatabase, tmp_path: Path) -> None:
    rig = make_rig(db, tmp_path)
    rig.agents.factory_error = RuntimeError("the SDK did not load")
    await rig.started(session_record("s-1"))
    assert rig.fed == [AgentFailed("s-1", "the agent could not start: the SDK did not load")]
    rig.agents.factory_error = None
    await rig.started(session_record("s-1"))  # not stuck: a later start makes a runner
    assert len(rig.agents.made) == 1


async def test_start_twice_makes_one_runner(db: BridgeDatabase, tmp_path: Path) -> None:
    rig = make_rig(db, tmp_path)
    rig.manager.start(session_record("s-1"), resume=False, create_cwd=False)
    rig.manager.start(session_record("s-1"), resume=False, create_cwd=False)
    await finished(rig.manager)
    assert len(rig.agents.made) == 1


# --- the inbox hand-off --------------------------------------------------------------------


async def test_deliver_sends_pending_rows_in_order_each_marked_sent_first(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    rig = make_rig(db, tmp_path)
    seen: list[tuple[str, list[tuple[str, str]]]] = []

    async def look(uid: str, text: str) -> None:
        seen.append((uid, await rig.inbox()))

    rig.agents.script.on_send = look
    await rig.started(session_record("s-1"))
    await add_inbox(db, "u-1", "u-2", "u-3")
    await add_inbox(db, "other", session_id="s-2")
    await rig.delivered()
    runner = rig.agents.runner("s-1")
    assert runner.inputs == [("u-1", "text of u-1"), ("u-2", "text of u-2"), ("u-3", "text of u-3")]
    assert seen == [
        ("u-1", [("u-1", "sent"), ("u-2", "pending"), ("u-3", "pending")]),
        ("u-2", [("u-1", "sent"), ("u-2", "sent"), ("u-3", "pending")]),
        ("u-3", [("u-1", "sent"), ("u-2", "sent"), ("u-3", "sent")]),
    ]
    assert await rig.inbox("s-2") == [("other", "pending")]  # another session's rows stay
    await rig.delivered()
    assert len(runner.inputs) == 3  # sent rows are not sent again


async def test_deliver_waits_for_the_runner_to_be_ready(db: BridgeDatabase, tmp_path: Path) -> None:
    rig = make_rig(db, tmp_path)
    rig.agents.script.ready = False
    await rig.started(session_record("s-1"))
    await add_inbox(db, "u-1")
    await rig.delivered()
    assert rig.agents.runner("s-1").inputs == []
    assert await rig.inbox() == [("u-1", "pending")]
    await rig.delivered("s-unknown")  # no runner at all: nothing happens


async def test_a_runner_error_stops_the_delivery_and_leaves_the_row_sent(
    db: BridgeDatabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(db, tmp_path)
    rig.agents.script.send_error = lambda uid: (
        RunnerError("the agent has ended") if uid == "u-2" else None
    )
    await rig.started(session_record("s-1"))
    await add_inbox(db, "u-1", "u-2", "u-3")
    await rig.delivered()
    assert [uid for uid, _ in rig.agents.runner("s-1").inputs] == ["u-1", "u-2"]
    assert await rig.inbox() == [("u-1", "sent"), ("u-2", "sent"), ("u-3", "pending")]
    assert "! input u-2 to s-1 not delivered: the agent has ended" in caplog.messages


async def test_after_a_crash_sent_rows_are_reconciled_exactly_once(
    db: BridgeDatabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "bridge.runtime.hosts.runners")
    agents = FakeAgents()
    agents.durable["s-1"] = {"got-it"}  # the agent's own record survived the crash
    await add_inbox(db, "got-it", "lost", state="sent")
    await add_inbox(db, "new")
    rig = make_rig(db, tmp_path, agents)  # a new manager over the same database
    await rig.started(session_record("s-1", str(tmp_path / "ws")), resume=True)
    await rig.delivered()
    runner = agents.runner("s-1")
    assert runner.calls[1:] == [
        ("received", ["got-it", "lost"]),
        ("send_input", "lost", "text of lost"),
        ("send_input", "new", "text of new"),
    ]
    # "got-it" stays sent until the agent reports its turn over (AgentAnswered).
    assert await rig.inbox() == [("got-it", "sent"), ("lost", "sent"), ("new", "sent")]
    assert "re-sending 1 input(s) the agent of s-1 never received" in caplog.messages
    await rig.delivered()
    assert len(runner.calls) == 4  # reconciled once; nothing sent twice


async def test_reconciliation_with_nothing_lost_sends_nothing(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    agents = FakeAgents()
    agents.durable["s-1"] = {"a", "b"}
    await add_inbox(db, "a", "b", state="sent")
    rig = make_rig(db, tmp_path, agents)
    await rig.started(session_record("s-1"))
    await rig.delivered()
    assert agents.runner("s-1").calls[1:] == [("received", ["a", "b"])]
    assert await rig.inbox() == [("a", "sent"), ("b", "sent")]  # nothing to send again


# --- steering and closing ------------------------------------------------------------------


async def test_interrupt_option_and_answer_reach_the_runner(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    rig = make_rig(db, tmp_path)
    rig.agents.script.option_result = lambda option, value: None if value == "bad" else value
    await rig.started(session_record("s-1"))
    rig.fed.clear()
    rig.manager.interrupt("s-1")
    rig.manager.set_option("s-1", "mode", "acceptEdits")
    rig.manager.set_option("s-1", "model", "bad")
    rig.manager.answer(AnswerPermission("s-1", "req-1", True, always=True, updated_input={"a": 1}))
    await finished(rig.manager)
    assert sorted(rig.agents.runner("s-1").calls[1:], key=str) == sorted(
        [
            ("interrupt",),
            ("set_option", "mode", "acceptEdits"),
            ("set_option", "model", "bad"),
            ("answer_permission", "req-1", True, "", True, {"a": 1}),
        ],
        key=str,
    )
    # The runner reports the outcome itself (a session host does, through its journal).
    assert sorted(rig.fed, key=repr) == sorted(
        [
            AgentOptionSet("s-1", "mode", "acceptEdits", "acceptEdits"),
            AgentOptionSet("s-1", "model", "bad", None),
        ],
        key=repr,
    )


async def test_an_option_for_a_missing_runner_is_answered_none(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    rig = make_rig(db, tmp_path)
    rig.manager.set_option("s-9", "effort", "high")
    rig.manager.interrupt("s-9")
    rig.manager.answer(AnswerPermission("s-9", "req-1", False))
    await finished(rig.manager)
    assert rig.fed == [AgentOptionSet("s-9", "effort", "high", None)]


async def test_close_closes_and_forgets_the_runner(db: BridgeDatabase, tmp_path: Path) -> None:
    rig = make_rig(db, tmp_path)
    await rig.started(session_record("s-1"))
    await rig.started(session_record("s-2"))
    assert rig.manager.running == 2
    rig.manager.close("s-1")
    await finished(rig.manager)
    assert rig.agents.runner("s-1").closed and not rig.agents.runner("s-2").closed
    assert rig.manager.running == 1
    await add_inbox(db, "u-1")
    await rig.delivered()
    assert rig.agents.runner("s-1").inputs == []


async def test_close_all_closes_every_runner_even_when_one_fails(
    db: BridgeDatabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(db, tmp_path)
    rig.agents.script.close_error = RuntimeError("stuck")
    await rig.started(session_record("s-1"))
    rig.agents.script = type(rig.agents.script)()
    await rig.started(session_record("s-2"))
    await rig.manager.close_all()
    assert [r.closed for r in rig.agents.made] == [True, True]
    assert rig.manager.running == 0
    assert "! closing runner s-1 failed" in caplog.messages
    rig.manager.start(session_record("s-3"), resume=False, create_cwd=False)  # refused: closed
    assert len(rig.agents.made) == 2


async def test_models_come_from_a_live_runner(db: BridgeDatabase, tmp_path: Path) -> None:
    rig = make_rig(db, tmp_path)
    assert rig.manager.models() == []
    rig.agents.script.models = [ModelEntry(id="opus", label="Opus")]
    await rig.started(session_record("s-1"))
    assert rig.manager.models() == [ModelEntry(id="opus", label="Opus")]
    assert rig.manager.models("opencode") == []  # per agent: Claude Code's are not OpenCode's


async def test_models_are_per_agent(db: BridgeDatabase, tmp_path: Path) -> None:
    rig = make_rig(db, tmp_path)
    rig.agents.script.models = [ModelEntry(id="mock/mock-model")]
    await rig.started(session_record("s-1", agent="opencode"))
    assert rig.manager.models("opencode") == [ModelEntry(id="mock/mock-model")]
    assert rig.manager.models() == []
