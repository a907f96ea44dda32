"""The daemon's side of agent sessions: start, feed, steer, stop or leave runners.

Each session's runner is driven through one per-session lock, so a resume, an input hand-off and
a close never interleave. Hand-offs follow the exactly-once rule of :mod:`bridge.agents.base`:
an inbox row is marked ``sent`` in the database *before* the runner gets it, and rows marked
``sent`` are reconciled with :meth:`Runner.received` each time the agent (re)becomes ready — at
boot, and after its session host was restarted — before anything else is delivered. A row
leaves the inbox when the agent reports its turn over (``AgentAnswered``).

Answers to permission asks are durable (``host_answers``) from the commit that decided them
until the runner delivered them; :class:`DatabaseHostStore` is the runners' view of that and of
the inbox.

At shutdown the daemon either closes every runner (its sessions end with it) or detaches from
them (``--keep-sessions``, and always under systemd): session hosts keep the agents running and
the next daemon adopts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from bridge.agents.base import AgentEvent, Emit, Runner, RunnerError, RunnerFactory, SessionSpec
from bridge.engine.effects import AnswerPermission, SessionRecord
from bridge.engine.inputs import (
    AgentEnded,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    Input,
    JournalRecord,
)
from bridge.host.driver import PermissionAnswer
from bridge.host.wire import Answer
from bridge.protocol import ModelEntry
from bridge.runtime.errands.workspace import WorkspaceError, resolve_session_cwd
from bridge.sandbox.hidden import is_hidden
from bridge.tasks import TaskSet
from store import bridge_state, host_answers
from store.bridge_state import InboxRow
from store.db import BridgeDatabase

__all__ = ["DatabaseHostStore", "RunnerManager"]

logger = logging.getLogger(__name__)


class RunnerManager:
    """Owns every runner of the daemon and the tasks that talk to them."""

    def __init__(
        self,
        factory: RunnerFactory,
        db: BridgeDatabase,
        roots: Sequence[Path],
        feed: Callable[[Input], None],
        *,
        env_for: Callable[[SessionRecord], dict[str, str] | str] | None = None,
        hidden: Sequence[str] = (),
    ) -> None:
        self._factory = factory
        self._hidden = tuple(hidden)
        self._env_for = env_for
        self._db = db
        self._roots = list(roots)
        self._feed = feed
        self._runners: dict[str, Runner] = {}
        self._ready: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks = TaskSet("runners", logger=logger)
        self._reconciled: set[str] = set()
        self._cwds: dict[str, Path] = {}
        self._agents: dict[str, str] = {}
        """Each session's agent (its record's ``agent``), for the model lists."""

    @property
    def running(self) -> int:
        return len(self._ready)

    def models(self, agent: str = "claude") -> list[ModelEntry]:
        """The model list of any live runner of `agent` that can tell (a host runner can: what
        its agent offered when it became ready)."""
        for session_id in self._ready:
            if self._agents.get(session_id, "claude") != agent:
                continue
            lister = getattr(self._runners.get(session_id), "models", None)
            if callable(lister):
                found = lister()
                if found:
                    return list(found)
        return []

    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._locks.setdefault(session_id, asyncio.Lock())

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.spawn(coro, name)

    # --- effects ----------------------------------------------------------------------------------

    def start(self, record: SessionRecord, *, resume: bool, create_cwd: bool) -> None:
        self._spawn(self._start(record, resume, create_cwd), f"start {record.session_id[:8]}")

    def deliver(self, session_id: str) -> None:
        self._spawn(self._deliver(session_id), f"deliver {session_id[:8]}")

    def interrupt(self, session_id: str) -> None:
        self._spawn(self._call(session_id, "interrupt"), f"interrupt {session_id[:8]}")

    def set_option(self, session_id: str, option: str, value: str) -> None:
        self._spawn(self._set_option(session_id, option, value), f"option {session_id[:8]}")

    def answer(self, answer: AnswerPermission) -> None:
        self._spawn(self._answer(answer), f"answer {answer.session_id[:8]}")

    def close(self, session_id: str) -> None:
        self._spawn(self._close(session_id), f"close {session_id[:8]}")

    async def settle(self, timeout: float) -> bool:
        """Wait until every runner started so far has its agent's state in the engine's queue.

        A runner that adopts a session host replays what the engine lacks and re-presents the
        cards still waiting; until then a phone's answer to such a card would find no card. The
        daemon holds the phones' commands until this returns. False when `timeout` passed first
        (the commands are let through anyway, and a late card is shown again when it comes).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            await self._tasks.drain(timeout=max(0.0, deadline - loop.time()))
            waits = [
                event.wait()
                for runner in self._runners.values()
                if isinstance(event := getattr(runner, "attached", None), asyncio.Event)
                and not event.is_set()
            ]
            if not waits:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                async with asyncio.timeout(remaining):
                    await asyncio.gather(*waits)
            except TimeoutError:
                return False

    def cursor_committed(self, session_id: str, seq: int) -> None:
        """The engine committed a session's journal records up to `seq`."""
        acked = getattr(self._runners.get(session_id), "acked", None)
        if callable(acked):
            acked(seq)

    async def close_all(self, timeout: float = 10.0, *, keep: bool = False) -> None:
        """Close every runner — or, with `keep`, detach from them and leave the agents running —
        and wait (at most `timeout`) for the runner tasks to end."""
        await self._tasks.close()
        runners = list(self._runners.items())
        self._runners.clear()
        self._ready.clear()

        async def close_one(session_id: str, runner: Runner) -> None:
            try:
                await (runner.detach() if keep else runner.close())
            except Exception:
                logger.exception("! closing runner %s failed", session_id[:8])

        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(close_one(sid, r) for sid, r in runners))

    # --- work -------------------------------------------------------------------------------------

    def _emit_for(self, session_id: str) -> Emit:
        def emit(event: AgentEvent | Input) -> None:
            inner = event.event if isinstance(event, JournalRecord) else event
            if isinstance(inner, AgentReady):
                self._ready.add(session_id)
                # A (new) agent is up: what it took of the inbox is checked again first.
                self._reconciled.discard(session_id)
                if inner.cwd is None and session_id in self._cwds:
                    # The engine stores the directory the session really runs in, whatever
                    # the runner reports: a relative or missing request resolved here.
                    inner = dataclasses.replace(inner, cwd=str(self._cwds[session_id]))
                    if isinstance(event, JournalRecord):
                        event = dataclasses.replace(event, event=inner)
                    else:
                        event = inner
            elif isinstance(inner, AgentFailed | AgentEnded):
                self._ready.discard(session_id)
            self._feed(event)

        return emit

    async def _start(self, record: SessionRecord, resume: bool, create_cwd: bool) -> None:
        session_id = record.session_id
        async with self._lock(session_id):
            if session_id in self._runners:
                return
            try:
                if resume or record.task is not None:
                    # A task's cwd is the editor's workspace root, checked by the orchestrator
                    # (it need not lie under the configured roots).
                    cwd = Path(record.cwd)
                    if not cwd.is_dir():
                        raise WorkspaceError(f"{record.cwd} no longer exists")
                    if is_hidden(str(cwd.resolve()), self._hidden):
                        raise WorkspaceError(
                            f"{record.cwd} is hidden from agents: it holds the bridge's own "
                            "data or credentials"
                        )
                else:
                    cwd = await asyncio.to_thread(
                        resolve_session_cwd,
                        self._roots,
                        record.cwd or None,
                        create=create_cwd,
                        hidden=self._hidden,
                    )
            except WorkspaceError as exc:
                self._feed(AgentFailed(session_id, str(exc)))
                return
            except (OSError, ValueError) as exc:
                # A stored cwd the system cannot take (a NUL byte, a name too long): the
                # session fails with the reason instead of staying "starting" for good.
                self._feed(AgentFailed(session_id, f"cannot use the session's folder: {exc}"))
                return
            env = self._env_for(record) if self._env_for is not None else {}
            if isinstance(env, str):  # e.g. the provider profile was deleted
                self._feed(AgentFailed(session_id, env))
                return
            self._cwds[session_id] = cwd
            self._agents[session_id] = record.agent
            spec = SessionSpec(
                session_id=session_id,
                cwd=cwd,
                permission_mode=record.permission_mode or "plan",
                model=record.model,
                effort_level=record.effort_level,
                provider_id=record.provider_id,
                sdk_session_id=record.sdk_session_id,
                env=env,
                agent_seq=record.agent_seq,
            )
            try:
                # The factory too: a runner that cannot even be built must fail the session,
                # or it stays pending (or, resumed, takes inputs it never delivers) for good.
                runner = self._factory(session_id, self._emit_for(session_id))
                self._runners[session_id] = runner
                await runner.start(spec, resume=resume)
            except Exception as exc:
                self._runners.pop(session_id, None)
                logger.exception("! runner %s failed to start", session_id[:8])
                self._feed(AgentFailed(session_id, f"the agent could not start: {exc}"))

    async def _deliver(self, session_id: str) -> None:
        async with self._lock(session_id):
            runner = self._runners.get(session_id)
            if runner is None or session_id not in self._ready:
                return  # delivered once the runner reports ready
            if session_id not in self._reconciled:
                await self._reconcile(session_id, runner)
            for row in await bridge_state.inbox_rows(
                self._db, session_id=session_id, state="pending"
            ):
                await bridge_state.mark_inbox_sent(self._db, row.uid)
                try:
                    await runner.send_input(row.uid, row.text)
                except RunnerError as exc:
                    logger.warning(
                        "! input %s to %s not delivered: %s", row.uid[:8], session_id[:8], exc
                    )
                    return

    async def _reconcile(self, session_id: str, runner: Runner) -> None:
        """Rows marked sent that the agent never got go back to pending (sent again, once).

        Rows it got stay ``sent`` until it reports their turn over (``AgentAnswered``): should
        the agent die first, they are the inputs its restart note says were interrupted. Rows
        ``taken`` (the agent's host journaled that it took them) are never asked about: they
        reached the agent, whatever its own record says yet.
        """
        sent = await bridge_state.inbox_rows(self._db, session_id=session_id, state="sent")
        if sent:
            received = await runner.received([row.uid for row in sent])
            lost = [row for row in sent if row.uid not in received]
            await bridge_state.mark_inbox_pending(self._db, [row.uid for row in lost])
            if lost:
                logger.info(
                    "re-sending %d input(s) the agent of %s never received",
                    len(lost),
                    session_id[:8],
                )
        self._reconciled.add(session_id)

    async def _call(self, session_id: str, method: str) -> None:
        runner = self._runners.get(session_id)
        if runner is None:
            return
        try:
            await getattr(runner, method)()
        except RunnerError as exc:
            logger.warning("! %s of %s failed: %s", method, session_id[:8], exc)

    async def _answer(self, answer: AnswerPermission) -> None:
        runner = self._runners.get(answer.session_id)
        if runner is None:
            return
        try:
            await runner.answer_permission(
                answer.request_id,
                answer.allow,
                message=answer.message,
                always=answer.always,
                updated_input=answer.updated_input,
            )
        except RunnerError as exc:
            # The answer stays stored: it goes out again when the runner reconnects.
            logger.warning(
                "! answer to %s of %s not delivered yet: %s",
                answer.request_id[:8],
                answer.session_id[:8],
                exc,
            )
            return
        await host_answers.delete_answer(self._db, answer.session_id, answer.request_id)

    async def _set_option(self, session_id: str, option: str, value: str) -> None:
        """The runner reports the outcome itself; without one (or when it refuses) it is None."""
        runner = self._runners.get(session_id)
        if runner is not None:
            try:
                await runner.set_option(option, value)
                return
            except RunnerError as exc:
                logger.warning("! %s change of %s failed: %s", option, session_id[:8], exc)
        self._feed(AgentOptionSet(session_id, option, value, None))

    async def _close(self, session_id: str) -> None:
        async with self._lock(session_id):
            runner = self._runners.pop(session_id, None)
            self._ready.discard(session_id)
            if runner is not None:
                try:
                    await runner.close()
                except Exception:
                    logger.exception("! closing runner %s failed", session_id[:8])
        self._locks.pop(session_id, None)
        self._agents.pop(session_id, None)


class DatabaseHostStore:
    """The runners' view of the store: stored answers and the inbox rows handed over."""

    def __init__(self, db: BridgeDatabase) -> None:
        self._db = db

    async def answers(self, session_id: str) -> list[Answer]:
        out = []
        for request_id, raw in await host_answers.load_answers(self._db, session_id):
            updated = raw.get("updated_input")
            answer = PermissionAnswer(
                allow=bool(raw.get("allow")),
                message=str(raw.get("message") or ""),
                always=bool(raw.get("always")),
                updated_input=updated if isinstance(updated, dict) else None,
            )
            out.append(Answer(request_id, answer))
        return out

    async def answer_delivered(self, session_id: str, request_id: str) -> None:
        await host_answers.delete_answer(self._db, session_id, request_id)

    async def sent_inputs(self, session_id: str) -> list[InboxRow]:
        rows = await bridge_state.inbox_rows(self._db, session_id=session_id)
        return [row for row in rows if row.state in ("sent", "taken")]
