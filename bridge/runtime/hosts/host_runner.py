"""A session's agent as the daemon drives it: through the session's host, whatever died before.

:class:`HostRunner` is the :class:`~bridge.agents.base.Runner` of every agent kind: the agent
itself runs in a session host (:mod:`bridge.host`), a process of its own that outlives the
daemon. The runner's job is to be attached to that host and to follow its journal.

Theory of operation (one supervising task per session):

1. **Attach.** A host that answers on the session's socket is *adopted*: ``hello`` carries the
   engine's committed ``agent_seq`` and every answer the store still holds for the session, so
   the host replays exactly what the engine lacks and applies those answers before it
   re-presents an ask. If the agent was ready before the engine's cursor, no ``ready`` record
   comes again, so the runner reports ``AgentReady`` (and the agent's state) itself. When nothing
   answers, whatever the last host journaled and nobody read is read from its journal file
   first, then a new host is spawned (``resume`` when the session has a conversation).
2. **Follow.** Every record becomes one ``JournalRecord`` input with its seq (the engine applies
   it once and commits the seq with its effects); asks still parked become
   ``PermissionStillPending``; pre-tool checks are answered at once by the gate
   (``tool_check``). Once the engine committed a seq, the runtime calls :meth:`HostRunner.acked`
   and the host may trim its journal up to there.
3. **The host ended.** When the connection closes, the rest of the journal is read from the file
   (the host may have died with records unsent). After ``failed`` the session is over. Otherwise
   — the agent exited, or the host itself was killed — the session is resumed in a new host, at
   most :data:`MAX_RESTARTS` times in a row (a finished turn resets the count). The new host is
   told why (a ``RestartOrder`` with the inputs handed over whose turn is not known to be over),
   and journals a ``restarted`` record first: the phone gets a ``system`` entry
   ``session_restart`` saying why and which of its inputs was interrupted (one the agent had
   taken whose turn never finished), exactly once, from whichever daemon follows that journal. An input handed over that the agent never
   took is not lost: the runner manager sends it again after the new host is ready. When the
   restarts run out: ``AgentEnded``.
4. **Detach or close.** ``detach`` (the daemon stops and keeps its sessions) closes only the
   connection. ``close`` tells the host to end the session (it stops the agent and removes its
   files); a host that does not answer is killed and its directory removed.

Nothing here answers a parked call on anyone's behalf: a call waits until the phone answers it,
across any number of daemon restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final, Protocol, assert_never

from bridge.agents.base import (
    Emit,
    Phase,
    RunnerError,
    SessionSpec,
    check_live,
    check_start,
)
from bridge.engine.inputs import (
    AgentEnded,
    AgentFailed,
    AgentReady,
    AgentStateChanged,
    JournalRecord,
    PermissionStillPending,
)
from bridge.host.driver import DriverSpec, PermissionAnswer
from bridge.host.events import (
    Answered,
    Exited,
    Failed,
    HostEvent,
    Ready,
)
from bridge.host.launch import LaunchSpec, RestartOrder
from bridge.host.layout import HostPaths, read_info
from bridge.host.wire import (
    Ack,
    Answer,
    Close,
    EventRecord,
    Hello,
    Interrupt,
    PermissionPending,
    SendInput,
    SetOption,
    Settings,
    Synced,
    ToolCheck,
    Verdict,
)
from bridge.protocol import ModelEntry
from bridge.runtime.hosts.launcher import (
    HostBusy,
    HostLauncher,
    HostLaunchError,
    kill_host,
    stop_host,
    wait_gone,
)
from bridge.runtime.hosts.link import HostLink, HostLinkError
from bridge.runtime.hosts.records import (
    host_event_input,
    interrupt_candidates,
    permission_input,
    read_dead_journal,
)
from bridge.sandbox import SandboxPolicy
from bridge.tasks import TaskSet
from store.bridge_state import InboxRow

__all__ = ["MAX_RESTARTS", "HostRunner", "HostStore", "SandboxFn", "ToolCheckFn"]

logger = logging.getLogger(__name__)

MAX_RESTARTS: Final = 2
"""Restarts in a row (no finished turn between them) before the session ends."""
CLOSE_WAIT: Final = 20.0
COMMIT_WAIT: Final = 10.0
"""Seconds a restart waits for the engine to commit what was read of the last host."""
"""Seconds a host may take to stop its agent on ``close`` before it is killed."""
_LOCK_RETRIES: Final = 50
_LOCK_RETRY_WAIT: Final = 0.1
_QUOTE_CHARS: Final = 60

SandboxFn = Callable[[SessionSpec, Mapping[str, str]], SandboxPolicy | str | None]
"""(spec, the agent's environment) → its sandbox, None (unconfined), or why it cannot start."""
ToolCheckFn = Callable[[str, str, dict[str, Any]], tuple[str, str] | None]
"""(session id, tool name, tool input) → ``("deny"|"ask", reason)`` or None (no opinion)."""


class HostStore(Protocol):
    """What a runner reads and writes of the store for its session."""

    async def answers(self, session_id: str) -> list[Answer]:
        """Answers decided and not yet confirmed by the host, oldest first."""
        ...

    async def answer_delivered(self, session_id: str, request_id: str) -> None:
        """The host has this answer: forget it."""
        ...

    async def sent_inputs(self, session_id: str) -> list[InboxRow]:
        """Inbox rows handed to the agent (``sent``, or ``taken``: it said it took them) whose
        turn is not known to be over, oldest first."""
        ...


@dataclasses.dataclass
class _Gone:
    """How a host ended, as far as its journal tells."""

    reason: str = "the session host stopped"
    failed: bool = False
    turn_completed: bool = False


class HostRunner:
    """One session, run by its session host (see the module docstring).

    Args:
        session_id: the bridge's session id.
        emit: where engine inputs go, in order.
        launcher: starts and finds hosts.
        agent: the agent kind (``claude``, ``scripted``, ``acp``).
        label: how messages name the agent (``Claude Code``).
        env_for: the agent's complete environment for a spawn, or why it cannot start.
        spec_for: the spec with the options now in force (mode, effort, model), for a spawn.
        driver_options: the driver's agent-specific options.
        tool_check: the gate in front of every tool call (None: no pre-tool checks).
        diff_allowed: whether every phone can show diffs.
        store: the runner's view of the store.
        orphan_timeout: passed to new hosts.
        max_restarts: restarts in a row before the session ends.
        sandbox_for: the agent's sandbox for a spawn (given the spec and its environment; run
            in a worker thread: it looks at the disk), None to run it unconfined, or why it
            cannot start.
    """

    def __init__(
        self,
        session_id: str,
        emit: Emit,
        *,
        launcher: HostLauncher,
        agent: str,
        label: str,
        env_for: Callable[[SessionSpec], Mapping[str, str] | str],
        spec_for: Callable[[SessionSpec], SessionSpec] | None = None,
        driver_options: Mapping[str, Any],
        tool_check: ToolCheckFn | None,
        diff_allowed: Callable[[], bool],
        store: HostStore,
        orphan_timeout: float,
        log_level: str = "INFO",
        max_restarts: int = MAX_RESTARTS,
        sandbox_for: SandboxFn | None = None,
    ) -> None:
        self.session_id = session_id
        self._sandbox_for = sandbox_for
        self._emit = emit
        self._launcher = launcher
        self._agent = agent
        self._label = label
        self._env_for = env_for
        self._spec_for = spec_for or (lambda spec: spec)
        self._options = dict(driver_options)
        self._tool_check = tool_check
        self._diff_allowed = diff_allowed
        self._store = store
        self._orphan_timeout = orphan_timeout
        self._log_level = log_level
        self._max_restarts = max_restarts
        self._phase = Phase.NEW
        self._spec: SessionSpec | None = None
        self._link: HostLink | None = None
        self._seen = 0
        self._sdk_session_id: str | None = None
        self._models: tuple[ModelEntry, ...] = ()
        self._diff_sent: bool | None = None
        self._stopping = False
        self._note: tuple[_Gone, int] | None = None
        self._acked = 0
        self._acked_changed = asyncio.Event()
        self._ack_scheduled = False
        self.attached = asyncio.Event()
        """Set once the engine has everything of the host (records, parked asks) — or there is
        no live host to have it from (a new one is started): the daemon holds the phones'
        commands until then."""
        self._tasks = TaskSet(f"session {session_id[:8]}", logger=logger)

    @property
    def sid(self) -> str:
        return self.session_id[:8]

    def models(self) -> list[ModelEntry]:
        """The models the agent offered when it became ready."""
        return list(self._models)

    # --- the Runner protocol ---------------------------------------------------------------------

    async def start(self, spec: SessionSpec, *, resume: bool) -> None:
        """Adopt the session's host, or start one; ``AgentReady``/``AgentFailed`` follow."""
        check_start(self._label, self._phase, self.session_id, spec)
        self._spec = spec
        self._seen = self._acked = spec.agent_seq
        self._sdk_session_id = spec.sdk_session_id
        self._phase = Phase.STARTING
        self._tasks.spawn(self._supervise(resume), f"host-{self.sid}")

    async def send_input(self, uid: str, text: str) -> None:
        check_live(self._label, self._phase)
        link = self._require_link()
        self._sync_settings(link)
        link.send(SendInput(uid, text))

    async def received(self, uids: Collection[str]) -> set[str]:
        link = self._require_link()
        try:
            return await link.received(uids)
        except HostLinkError as exc:
            raise RunnerError(str(exc)) from None

    async def interrupt(self) -> None:
        if self._link is not None:
            self._link.send(Interrupt())

    async def set_option(self, option: str, value: str) -> str | None:
        """Ask for the change; the result comes back as an ``AgentOptionSet`` record."""
        check_live(self._label, self._phase)
        self._require_link().send(SetOption(option, value))
        return None

    async def answer_permission(
        self,
        request_id: str,
        allow: bool,
        *,
        message: str = "",
        always: bool = False,
        updated_input: dict[str, Any] | None = None,
    ) -> None:
        """Deliver an answer and wait until the host confirmed it.

        Raises:
            RunnerError: no host is connected or it did not confirm (the stored answer is sent
                again at the next connection).
        """
        link = self._require_link()
        answer = PermissionAnswer(allow, message, always, updated_input)
        try:
            await link.answer(request_id, answer)
        except HostLinkError as exc:
            raise RunnerError(str(exc)) from None

    async def close(self) -> None:
        """End the session: the host stops the agent and removes its files (idempotent)."""
        if self._phase is Phase.CLOSED:
            return
        self._phase = Phase.CLOSED
        self._stopping = True
        paths = self._launcher.paths(self.session_id)
        info = read_info(paths)  # the host removes its files as it ends
        link = self._link
        if link is not None:
            link.send(Close("the session was closed"))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_WAIT):
                    while await link.next() is not None:
                        pass
        await self._tasks.close()
        if link is not None:
            await link.close()
        # A host that did not end by itself (or one the link never reached) is stopped here.
        if info is not None and not await wait_gone(info, CLOSE_WAIT / 4):
            kill_host(info)
        await self._launcher.kill(self.session_id, remove=True)

    async def detach(self) -> None:
        """The daemon stops and keeps its sessions: let go of the host, leave it running."""
        self._stopping = True
        self._phase = Phase.CLOSED
        await self._tasks.close()
        if self._link is not None:
            await self._link.close()
            self._link = None

    def acked(self, seq: int) -> None:
        """The engine committed the records up to `seq`: the host may trim them.

        Coalesced: one ``ack`` per turn of the event loop, however many commits came in it.
        """
        if seq <= self._acked:
            return
        self._acked = seq
        self._acked_changed.set()
        if not self._ack_scheduled:
            self._ack_scheduled = True
            asyncio.get_running_loop().call_soon(self._send_ack)

    async def _committed(self, seq: int, timeout: float = COMMIT_WAIT) -> None:
        """Wait (bounded) until the engine committed the records up to `seq`."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self._acked < seq:
                    self._acked_changed.clear()
                    await self._acked_changed.wait()

    def _send_ack(self) -> None:
        self._ack_scheduled = False
        if self._link is not None:
            self._link.send(Ack(self._acked))

    # --- supervising -----------------------------------------------------------------------------

    async def _supervise(self, resume: bool) -> None:
        restarts = 0
        try:
            while not self._stopping:
                attached = await self._attach(resume)
                if attached is None:
                    return
                if isinstance(attached, HostLink):
                    link = attached
                    gone = await self._follow(link)
                    self._link = None
                    await link.close()
                    if self._stopping:
                        return
                    gone = await self._drain_journal(gone)
                else:
                    gone = attached
                self.attached.set()  # the host is gone: all it had was read from its journal
                if gone.failed:
                    self._phase = Phase.FAILED
                    return
                if gone.turn_completed:
                    restarts = 0
                if restarts >= self._max_restarts:
                    self._phase = Phase.ENDED
                    suffix = f" after {restarts} restart(s)" if restarts else ""
                    self._emit(AgentEnded(self.session_id, f"{gone.reason}{suffix}"))
                    return
                restarts += 1
                self._note = (gone, restarts)
                resume = True
                self._phase = Phase.RESTARTING
                logger.warning(
                    "! session %s: %s; restarting (%d of %d)",
                    self.sid,
                    gone.reason,
                    restarts,
                    self._max_restarts,
                )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("x session %s: the runner failed", self.sid)
            if not self._stopping:
                self._phase = Phase.ENDED
                self._emit(AgentEnded(self.session_id, f"runner failed: {type(exc).__name__}"))
        finally:
            self.attached.set()  # nothing more will come: nobody waits on this session

    async def _attach(self, resume: bool) -> HostLink | _Gone | None:
        """The session's host, adopted or new.

        Returns:
            The link; or how a host that ended before we could connect went (its journal,
            read from the file); or None after reporting why no host can run.
        """
        paths = self._launcher.paths(self.session_id)
        link = await self._connect(paths)
        if link is not None:
            self._adopted(link)
            return link
        if paths.info.exists():
            # A host ran and is gone (killed, or it stopped while no daemon was there): what it
            # journaled and nobody read comes first, and the phone hears about the restart.
            gone = await self._drain_journal(_Gone())
            if gone.failed:
                return gone
            if self._note is None:
                self._note = (gone, 1)
        # No live host to adopt: a new one has no card to re-present, and what a dead one
        # journaled was read above. The phones' commands need not wait for the new host to
        # start (a Python process and its agent, for each session at a daemon's start).
        self.attached.set()
        for attempt in range(2):
            try:
                await self._spawn(resume or self._sdk_session_id is not None)
                break
            except HostBusy:
                if attempt == 1:
                    self._fail("another session host keeps running this session")
                    return None
                logger.warning(
                    "! session %s: a stray host holds the session; stopping it", self.sid
                )
                await stop_host(paths)
            except HostLaunchError as exc:
                self._fail(str(exc))
                return None
        link = await self._connect(paths)
        if link is None:
            # It ended at once (an agent that could not start): its journal says how.
            return await self._drain_journal(_Gone())
        self._link = link
        return link

    async def _connect(self, paths: HostPaths) -> HostLink | None:
        try:
            return await HostLink.connect(
                paths.socket, await self._hello(), self.sid, on_answer_done=self._answer_done
            )
        except HostLinkError as exc:
            logger.warning("! session %s: %s; stopping that host", self.sid, exc)
            await stop_host(paths)
            return None

    def _answer_done(self, request_id: str) -> None:
        """The host has an answer that ``hello`` carried: the store may forget it."""
        self._tasks.spawn(
            self._store.answer_delivered(self.session_id, request_id), f"answer-{self.sid}"
        )

    async def _hello(self) -> Hello:
        answers = tuple(await self._store.answers(self.session_id))
        diff = self._diff_allowed()
        self._diff_sent = diff
        return Hello(after=self._seen, diff_allowed=diff, answers=answers)

    def _adopted(self, link: HostLink) -> None:
        """A running host was found: report it ready unless its ``ready`` record comes again."""
        self._link = link
        welcome = link.welcome
        assert welcome is not None
        logger.info(
            "session %s: adopted its host (pid %d), replaying after seq %d",
            self.sid,
            welcome.pid,
            self._seen,
        )
        if welcome.ready_seq is not None and welcome.ready_seq <= self._seen:
            status = welcome.status
            self._phase = Phase.READY
            self._sdk_session_id = status.sdk_session_id or self._sdk_session_id
            self._emit(AgentReady(self.session_id, self._sdk_session_id, status.model, self._cwd()))
            self._emit(AgentStateChanged(self.session_id, status.state))

    async def _spawn(self, resume: bool) -> None:
        assert self._spec is not None
        spec = self._spec = self._spec_for(self._spec)
        env = self._env_for(spec)
        if isinstance(env, str):
            raise HostLaunchError(env)
        sandbox: SandboxPolicy | None = None
        if self._sandbox_for is not None:
            planned = await asyncio.to_thread(self._sandbox_for, spec, env)
            if isinstance(planned, str):
                raise HostLaunchError(planned)
            sandbox = planned
        driver = DriverSpec(
            session_id=self.session_id,
            cwd=str(spec.cwd),
            permission_mode=spec.permission_mode,
            model=spec.model,
            effort_level=spec.effort_level,
            sdk_session_id=self._sdk_session_id,
            resume=resume and self._sdk_session_id is not None,
            env=env,
            options=self._options,
            sandbox=sandbox,
        )
        restart: RestartOrder | None = None
        if self._note is not None:
            gone, count = self._note
            # The inbox must reflect every record read so far (an `answered` among them).
            await self._committed(self._seen)
            sent = await self._store.sent_inputs(self.session_id)
            restart = RestartOrder(
                gone.reason,
                count,
                self._max_restarts,
                interrupt_candidates(sent),
                tuple(row.uid for row in sent if row.state == "taken"),
            )
        launch = LaunchSpec(
            agent=self._agent,
            home=self._launcher.home,
            driver=driver,
            orphan_timeout=self._orphan_timeout,
            log_level=self._log_level,
            seq_floor=self._seen,
            restart=restart,
        )
        pid = await self._launcher.spawn(launch)
        self._note = None  # the new host journals it: whoever follows that journal says it
        logger.info("session %s: started its host (pid %d)", self.sid, pid)

    async def _follow(self, link: HostLink) -> _Gone:
        """Forward the host's stream until it closes; what its journal said about the end."""
        gone = _Gone()
        while (item := await link.next()) is not None:
            if isinstance(item, EventRecord):
                self._record(item.seq, item.event, gone)
            elif isinstance(item, PermissionPending):
                self._emit(PermissionStillPending(permission_input(self.session_id, item.request)))
            elif isinstance(item, Synced):
                self.attached.set()
            elif isinstance(item, ToolCheck):
                link.send(self._verdict(item))
            else:
                assert_never(item)
        return gone

    def _record(self, seq: int, event: HostEvent, gone: _Gone) -> None:
        if seq <= self._seen:
            return
        self._seen = seq
        if isinstance(event, Ready):
            self._phase = Phase.READY
            self._sdk_session_id = event.sdk_session_id or self._sdk_session_id
            self._models = tuple(ModelEntry(id=m.id, label=m.label) for m in event.models)
        elif isinstance(event, Failed):
            gone.failed = True
            gone.reason = event.reason
        elif isinstance(event, Exited):
            gone.reason = f"{self._label} stopped ({event.reason})"
            gone.turn_completed = gone.turn_completed or event.turn_completed
        elif isinstance(event, Answered):
            # A finished turn resets the restart budget, also for a host killed without a word.
            gone.turn_completed = True
        self._emit(JournalRecord(self.session_id, seq, host_event_input(self.session_id, event)))

    def _verdict(self, check: ToolCheck) -> Verdict:
        if self._tool_check is None:
            return Verdict(check.request_id, "none")
        try:
            verdict = self._tool_check(self.session_id, check.tool_name, dict(check.tool_input))
        except Exception as exc:  # the gate fails closed: the phone decides
            logger.exception("x session %s: the pre-tool check failed", self.sid)
            return Verdict(check.request_id, "ask", f"the gate failed ({type(exc).__name__})")
        if verdict is None:
            return Verdict(check.request_id, "none")
        return Verdict(check.request_id, verdict[0], verdict[1])

    async def _drain_journal(self, gone: _Gone) -> _Gone:
        """Records the dead host journaled but never sent: read them from its file."""
        path = self._launcher.paths(self.session_id).journal
        for seq, event in await read_dead_journal(path, self._seen, self.sid):
            if event is None:
                self._seen = max(self._seen, seq)  # damaged or trimmed: counted, not applied
            else:
                self._record(seq, event, gone)
        return gone

    # --- helpers ---------------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        logger.warning("! session %s: %s", self.sid, reason)
        self._phase = Phase.FAILED if self._phase is Phase.STARTING else Phase.ENDED
        self._emit(AgentFailed(self.session_id, reason))

    def _require_link(self) -> HostLink:
        if self._link is None:
            raise RunnerError(f"{self._label} is not connected (its session host is restarting)")
        return self._link

    def _sync_settings(self, link: HostLink) -> None:
        diff = self._diff_allowed()
        if diff != self._diff_sent:
            self._diff_sent = diff
            link.send(Settings(diff))

    def _cwd(self) -> str | None:
        return str(self._spec.cwd) if self._spec is not None else None
