"""The session host: one agent, its journal, its parked callbacks, and the daemon's socket.

Theory of operation. :class:`SessionHost` is the :class:`~bridge.host.driver.HostServices` of
its driver and the server of its socket:

- **Events.** ``emit`` appends the event to a batch; the batch is written to the journal, with
  one ``fdatasync``, at the end of the current turn of the event loop (a driver that emits a
  thousand entries in a row costs a few syncs, not a thousand). Nothing reaches the daemon
  before it is in the journal: the connection's sender reads what it sends *from the journal*,
  which makes the replay after a reconnect and the live stream one and the same path.
- **Parked callbacks.** A permission ask is an event (journaled, so its card is created exactly
  once) plus a future kept in :attr:`_permissions` until an ``answer`` resolves it; a daemon that
  connects gets every ask still parked as ``permission_pending`` once its replay reached the
  journal's end. A pre-tool check is only a future: it is sent to every daemon that connects
  until one answers it. Nothing here times out or answers on the daemon's behalf.
- **One daemon at a time.** A new connection that says ``hello`` replaces the current one (the
  old daemon is dead or about to be). Its answers are applied before anything is sent, so an
  answer the old daemon made durable but never delivered is not asked for again.
- **The end.** After ``close`` the host stops the agent, deletes its directory and exits. When
  the agent exits by itself the host journals ``exited`` (or the driver already said ``failed``),
  lets a connected daemon receive it, and exits; the journal stays for the next daemon, which
  reads what it did not get from the file. With no daemon for ``orphan_timeout`` seconds while
  the agent is idle and nothing is parked, the host stops the agent and exits (the session is
  resumed by the next daemon). Until a first daemon connected, ``unclaimed_timeout`` (two
  minutes) applies instead: a host nobody took over was launched by a daemon that stopped or
  died before it connected, and it would otherwise keep its agent running for an hour. A
  journal that cannot be written stops the host (fail loud).

Security: the socket is 0600 in the host's 0700 directory, and a peer whose uid is not ours
(or root's) is refused (``SO_PEERCRED``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, assert_never

from bridge.host.connection import DaemonConnection
from bridge.host.driver import (
    Driver,
    DriverError,
    DriverFactory,
    PermissionAnswer,
    ToolVerdict,
)
from bridge.host.events import (
    Exited,
    HostEvent,
    PermissionAsked,
    Ready,
    Restarted,
    decode_event,
    encode_event,
)
from bridge.host.journal import Journal, JournalError
from bridge.host.launch import LaunchSpec, RestartOrder
from bridge.host.layout import HostPaths
from bridge.host.wire import (
    Ack,
    Answer,
    AnswerDone,
    AskReceived,
    Close,
    Closed,
    DaemonMessage,
    Hello,
    Interrupt,
    Problem,
    Received,
    SendInput,
    SetOption,
    Settings,
    ToolCheck,
    Verdict,
    Welcome,
    WireError,
)
from bridge.peercred import peer_allowed
from bridge.tasks import TaskSet, race

__all__ = ["TRIM_EVERY", "SessionHost", "bind_socket"]

logger = logging.getLogger(__name__)

TRIM_EVERY: Final = 512
"""Acknowledged records kept before the journal is trimmed (a trim copies what is left)."""
REPLAY_BATCH: Final = 256
"""Records read from the journal and written at once before waiting for the socket to drain."""
_FAREWELL_WAIT: Final = 2.0
_ORPHAN_CHECK: Final = 30.0


class SessionHost:
    """One session's host (see the module docstring).

    Args:
        spec: the launch spec.
        paths: the host's files.
        journal: the open journal (this host holds its lock).
        factory: builds the driver of ``spec.agent``.
        clock: unix seconds (entry timestamps).
        monotonic: seconds for the orphan timeout.
    """

    def __init__(
        self,
        spec: LaunchSpec,
        paths: HostPaths,
        journal: Journal,
        factory: DriverFactory,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._spec = spec
        self._paths = paths
        self._journal = journal
        self._clock = clock
        self._monotonic = monotonic
        self._batch: list[HostEvent] = []
        self._flush_scheduled = False
        self._ready_seq: int | None = None
        self._diff_allowed = False
        self._acked = journal.first_seq - 1
        self._permissions: dict[str, tuple[PermissionAsked, asyncio.Future[PermissionAnswer]]] = {}
        self._checks: dict[str, tuple[ToolCheck, asyncio.Future[ToolVerdict]]] = {}
        self._link: DaemonConnection | None = None
        self._orphaned_since: float = monotonic()
        self._claimed = False
        """Whether a daemon has connected (said ``hello``) since the host started."""
        self._grew = asyncio.Event()
        self._stop = asyncio.Event()
        self._close_requested: Close | None = None
        self._fatal: str | None = None
        self._ended: str | None = None
        self._tasks = TaskSet(f"host {spec.driver.session_id[:8]}", logger=logger)
        self.driver: Driver = factory(spec.driver, self)

    @property
    def sid(self) -> str:
        return self._spec.driver.session_id[:8]

    # --- HostServices ----------------------------------------------------------------------------

    def emit(self, event: HostEvent) -> None:
        """Queue `event` for the journal (written at the end of this loop turn)."""
        if self._fatal is not None:
            raise JournalError(self._fatal)
        self._batch.append(event)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write the batch to the journal now (one sync); a failure stops the host."""
        self._flush_scheduled = False
        if not self._batch or self._fatal is not None:
            return
        batch, self._batch = self._batch, []
        try:
            seqs = self._journal.append_many([encode_event(event) for event in batch])
        except (JournalError, ValueError) as exc:
            self._fatal = f"the journal cannot be written: {exc}"
            logger.critical("x host %s: %s; stopping", self.sid, self._fatal)
            self._stop.set()
            return
        for seq, event in zip(seqs, batch, strict=True):
            if isinstance(event, Ready):
                self._ready_seq = seq
        self._grew.set()

    async def ask_permission(self, request: PermissionAsked) -> PermissionAnswer:
        """Journal the ask and park it until the daemon answers (no time limit)."""
        future: asyncio.Future[PermissionAnswer] = asyncio.get_running_loop().create_future()
        self.emit(request)
        self._permissions[request.request_id] = (request, future)
        try:
            return await future
        finally:
            entry = self._permissions.get(request.request_id)
            if entry is not None and entry[1] is future:
                del self._permissions[request.request_id]

    async def check_tool(
        self, request_id: str, tool_name: str, tool_input: Mapping[str, Any]
    ) -> ToolVerdict:
        """Park a pre-tool check until the daemon answers it (no time limit)."""
        future: asyncio.Future[ToolVerdict] = asyncio.get_running_loop().create_future()
        check = ToolCheck(request_id, tool_name, dict(tool_input))
        self._checks[request_id] = (check, future)
        if self._link is not None:
            self._link.send(check)
        try:
            return await future
        finally:
            entry = self._checks.get(request_id)
            if entry is not None and entry[1] is future:
                del self._checks[request_id]

    def diff_allowed(self) -> bool:
        return self._diff_allowed

    def now(self) -> float:
        return self._clock()

    # --- running ---------------------------------------------------------------------------------

    async def run(self, sock: socket.socket, on_serving: Callable[[], None]) -> int:
        """Serve until the session ends; the process exit status.

        Args:
            sock: the bound, listening socket (non-blocking).
            on_serving: called once the socket accepts connections and the driver started.
        """
        server = await asyncio.start_unix_server(self._accept, sock=sock)
        if self._spec.restart is not None:
            await self._say_restarted(self._spec.restart)
        driver_task = self._tasks.spawn(self.driver.run(), "agent")
        assert driver_task is not None  # the task set closes only below
        self._tasks.spawn(self._watch_orphan(), "orphan watch")
        on_serving()
        try:
            # Shielded: a stop request must not cancel the agent; `_stop_agent` ends it.
            await race(asyncio.shield(driver_task), self._stop.wait())
            if driver_task.done():
                await self._agent_gone(driver_task)
            else:
                await self._stop_agent(driver_task)
        finally:
            server.close()
            await self._tasks.close()
            link = self._link
            if link is not None:
                if self._close_requested is not None:
                    link.send(Closed())
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(_FAREWELL_WAIT):
                            await link.drained()
                await link.close()
        if self._close_requested is not None:
            self._remove_files()
            return 0
        self._journal.close()
        return 1 if self._fatal is not None else 0

    async def _say_restarted(self, order: RestartOrder) -> None:
        """The first record of a host that resumes a session: why, and what was cut short.

        Which of the candidates the last agent took comes from the agent's own record (its
        driver's ``received``, which works before the agent starts); on a failure to read it
        none is named (the note still says the session restarted).
        """
        known = set(order.taken)
        unsure = [c.uid for c in order.candidates if c.uid not in known]
        try:
            taken = known | await self.driver.received(unsure)
        except DriverError as exc:
            logger.warning("! host %s: cannot tell which inputs were cut short: %s", self.sid, exc)
            taken = known
        interrupted = tuple(c for c in order.candidates if c.uid in taken)
        self.emit(Restarted(order.reason, order.count, order.budget, interrupted, self.now()))
        self.flush()

    def request_stop(self) -> None:
        """SIGTERM: stop the agent and exit; the journal stays for the next daemon."""
        self._stop.set()

    async def _agent_gone(self, driver_task: asyncio.Future[str | None]) -> None:
        """The agent exited by itself: say so, let the daemon hear it, then end."""
        try:
            reason = driver_task.result()
        except Exception as exc:  # logged with its traceback by the task set
            reason = f"the agent's driver failed: {type(exc).__name__}"
        if reason is None:
            reason = "the agent stopped"
        self._ended = reason
        if self._ready_seq is not None and self._fatal is None:
            status = self.driver.status()
            with contextlib.suppress(JournalError):
                self.emit(Exited(reason, status.turn_completed, status.taken))
        self.flush()
        logger.info("host %s: the agent is gone (%s)", self.sid, reason)
        link = self._link
        if link is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_FAREWELL_WAIT):
                    await link.caught_up(self._journal.last_seq)

    async def _stop_agent(self, driver_task: asyncio.Future[str | None]) -> None:
        """Asked to stop (close, SIGTERM, orphaned, fatal): the agent goes first.

        Only the user's close interrupts a running turn; any other stop must not make the agent
        record a refusal of a call that nobody refused (see ``Driver.close``).
        """
        try:
            await self.driver.close(interrupt=self._close_requested is not None)
        finally:
            # A driver that failed is logged by the task set; the stop goes on either way.
            await asyncio.gather(driver_task, return_exceptions=True)
        self.flush()
        if self._close_requested is not None:
            for _, future in self._permissions.values():
                future.cancel()
            for _, check_future in self._checks.values():
                check_future.cancel()

    async def _watch_orphan(self) -> None:
        """Stop when no daemon came for `orphan_timeout` s (`unclaimed_timeout` s while none
        ever did) while nothing waits on one."""
        spec = self._spec
        while True:
            await asyncio.sleep(min(_ORPHAN_CHECK, spec.orphan_timeout, spec.unclaimed_timeout))
            if self._link is not None:
                continue
            limit = (
                spec.orphan_timeout
                if self._claimed
                else min(spec.orphan_timeout, spec.unclaimed_timeout)
            )
            idle = self.driver.status().state == "idle"
            waiting = self._permissions or self._checks
            if idle and not waiting and self._monotonic() - self._orphaned_since >= limit:
                logger.info(
                    "host %s: %s for %.0f s and the agent is idle; stopping",
                    self.sid,
                    "no daemon" if self._claimed else "no daemon took this host over",
                    limit,
                )
                self._stop.set()
                return

    def _remove_files(self) -> None:
        """The session is closed: nothing here is needed any more."""
        self._journal.close()
        shutil.rmtree(self._paths.root, ignore_errors=True)

    # --- connections -----------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not peer_allowed(writer):
            logger.warning("! host %s: refused a connection from another user", self.sid)
            writer.close()
            return
        link = DaemonConnection(self, reader, writer)
        try:
            hello = await link.handshake()
        except (TimeoutError, WireError, ConnectionError) as exc:
            logger.warning("! host %s: a connection failed its handshake: %s", self.sid, exc)
            await link.close()
            return
        if hello is None:
            await link.close()
            return
        previous, self._link = self._link, link
        self._claimed = True
        if previous is not None:
            await previous.close()
        logger.info("host %s: a daemon connected (replay after %d)", self.sid, hello.after)
        self._diff_allowed = hello.diff_allowed
        for answer in hello.answers:
            self._answer(answer, reply=link)
        try:
            await link.serve(hello.after)
        finally:
            if self._link is link:
                self._link = None
                self._orphaned_since = self._monotonic()
                logger.info("host %s: the daemon went away", self.sid)

    def welcome(self) -> Welcome:
        journal = self._journal
        return Welcome(
            session_id=self._spec.driver.session_id,
            agent=self._spec.agent,
            pid=os.getpid(),
            first_seq=journal.first_seq,
            next_seq=journal.next_seq,
            ready_seq=self._ready_seq,
            status=self.driver.status(),
            ended=self._ended,
        )

    def on_message(self, message: DaemonMessage, link: DaemonConnection) -> None:
        """One message of the connected daemon (never ``hello``: that was the handshake)."""
        match message:
            case SendInput():
                try:
                    self.driver.send_input(message.uid, message.text)
                except DriverError as exc:
                    logger.warning("! host %s: input %s refused: %s", self.sid, message.uid, exc)
            case AskReceived():
                self._tasks.spawn(self._received(message, link), "received")
            case Interrupt():
                self._tasks.spawn(self.driver.interrupt(), "interrupt")
            case SetOption():
                self._tasks.spawn(self.driver.set_option(message.option, message.value), "option")
            case Answer():
                self._answer(message, reply=link)
            case Verdict():
                entry = self._checks.get(message.request_id)
                if entry is not None and not entry[1].done():
                    entry[1].set_result(ToolVerdict(message.decision, message.reason))
            case Ack():
                self._ack(message.through)
            case Settings():
                self._diff_allowed = message.diff_allowed
            case Close():
                self._close_requested = message
                self._stop.set()
            case Hello():
                link.send(Problem("hello twice on one connection"))
            case _:
                assert_never(message)

    async def _received(self, message: AskReceived, link: DaemonConnection) -> None:
        try:
            uids = await self.driver.received(message.uids)
        except DriverError as exc:
            logger.error("x host %s: cannot tell which inputs the agent got: %s", self.sid, exc)
            link.send(Problem(f"received: {exc}"))
            return
        link.send(Received(message.req, tuple(u for u in message.uids if u in uids)))

    def _answer(self, answer: Answer, *, reply: DaemonConnection) -> None:
        entry = self._permissions.get(answer.request_id)
        applied = entry is not None and not entry[1].done()
        if entry is not None and applied:
            entry[1].set_result(answer.answer)
        reply.send(AnswerDone(answer.request_id, applied))

    def _ack(self, through: int) -> None:
        journal = self._journal
        through = min(through, journal.last_seq)
        if through <= self._acked:
            return
        self._acked = through
        if through - journal.first_seq + 1 >= TRIM_EVERY:
            try:
                journal.trim(through)
            except JournalError as exc:
                self._fatal = str(exc)
                logger.critical("x host %s: %s; stopping", self.sid, exc)
                self._stop.set()

    # --- what a link reads -----------------------------------------------------------------------

    def records_after(self, seq: int) -> list[tuple[int, HostEvent]]:
        """Journal records after `seq` (at most a batch), flushed first."""
        self.flush()
        out: list[tuple[int, HostEvent]] = []
        for record_seq, payload in self._journal.read(after=seq, limit=REPLAY_BATCH):
            out.append((record_seq, decode_event(payload)))
        return out

    def parked(self) -> tuple[list[PermissionAsked], list[ToolCheck]]:
        """The asks and checks a new daemon must hear about."""
        asks = [req for req, future in self._permissions.values() if not future.done()]
        checks = [check for check, future in self._checks.values() if not future.done()]
        return asks, checks

    async def journal_beyond(self, seq: int) -> None:
        """Wait until the journal holds a record after `seq` (return at once if it does).

        The condition is checked when this coroutine first runs, not only when the journal next
        grows. Its caller starts it as a task (``race``): a batch flushed between that task's
        creation and its first step set the event before this could clear it, and the sender
        then slept with those records unsent until the agent emitted something else — a turn's
        whole output held back (seen as a scripted echo stalled until the test gave up).
        """
        while self._journal.last_seq <= seq:
            self._grew.clear()
            await self._grew.wait()

    @property
    def journal_floor(self) -> int:
        """The seq before the oldest record still kept."""
        return self._journal.first_seq - 1


def bind_socket(paths: HostPaths) -> socket.socket:
    """Bind the host's socket 0600 under a temporary name, then rename it into place.

    The caller holds the journal's lock, so no other host serves this directory: a socket file
    left by a dead host is replaced.

    Raises:
        OSError: the socket cannot be created (a path too long for a unix socket among others).
    """
    temporary = paths.root / f".s{secrets.token_hex(4)}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(temporary))
        os.chmod(temporary, 0o600)
        sock.listen(8)
        sock.setblocking(False)
        os.replace(temporary, paths.socket)
    except BaseException:
        sock.close()
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return sock
