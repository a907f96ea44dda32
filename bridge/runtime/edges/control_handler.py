"""The daemon's answers on the control socket (``codedeck-bridge status``, ``pair``, ``phones``,
``unpair``, ``sessions``), and the local listeners of the engine's ``Notify`` effects.

Reads go through the engine's queries; changes go to the engine as inputs (``pair.open`` feeds
``PairingWindowRequested``, ``unpair`` feeds ``PhoneUnpaired``, ``sessions.close`` feeds one
``SessionCloseRequested`` per session), so the control socket never writes engine state behind
the engine loop's back. The session hosts in ``status`` and ``sessions.list`` are read from
their ``host.json`` files and ``/proc`` (:mod:`bridge.control.hosts`), not asked. The answer of a change is what the engine
*will* do: the input is queued, and ``pair.wait`` learns the outcome from the engine's
``Notify("paired")`` / ``Notify("pairing-closed")``.

The same notifications keep a private relay's registry in step (a paired phone is registered
there; the relay's pairing window closes when the bridge's does: a phone paired through it, or
it expired) and refresh the ``STATUS=`` line systemd shows.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote, urlsplit

from bridge import __version__
from bridge.control.hosts import running_hosts, session_host
from bridge.control.methods import (
    HandlerError,
    PairNpubResult,
    PairOpenResult,
    PairWaitResult,
    PhoneInfo,
    RelayInfo,
    SessionInfo,
    SessionsCloseResult,
    StatusResult,
    UnpairResult,
    iso_timestamp,
)
from bridge.control.task_methods import QueuedResult, TaskStartResult, TasksWatchResult
from bridge.control.terminal_text import safe_text
from bridge.engine.core import Engine
from bridge.engine.effects import Notify
from bridge.engine.inputs import (
    Input,
    PairingWindowRequested,
    PhonePairedManually,
    PhoneUnpaired,
    SessionCloseRequested,
)
from bridge.nostr.keys import Keypair, hex_to_npub, npub_to_hex
from bridge.nostr.pool import RelayPool
from bridge.runtime.edges.control_tasks import DaemonTasks
from bridge.runtime.edges.registration import RelayRegistration

__all__ = ["DaemonControl", "pair_url", "web_page_of", "web_pair_link", "web_pair_url"]


def pair_url(npub: str, relays: Sequence[str], machine: str, token: str) -> str:
    """The ``codedeck://pair?…`` link a phone scans (PROTOCOL.md §3)."""
    joined = ",".join(quote(r, safe="") for r in relays)
    return (
        f"codedeck://pair?npub={npub}&relays={joined}"
        f"&machine={quote(machine, safe='')}&token={quote(token, safe='')}"
    )


def web_page_of(embedded_url: str) -> str:
    """The page the embedded relay at ``embedded_url`` serves: ``https://`` when it speaks
    ``wss://``."""
    parts = urlsplit(embedded_url)
    scheme = "https" if parts.scheme == "wss" else "http"
    return f"{scheme}://{parts.netloc}/"


def web_pair_url(
    embedded_url: str, npub: str, relays: Sequence[str], machine: str, token: str
) -> str:
    """The CodeDeck Web pairing link of the page the embedded relay at ``embedded_url`` serves."""
    return web_pair_link(web_page_of(embedded_url), npub, relays, machine, token)


def web_pair_link(page: str, npub: str, relays: Sequence[str], machine: str, token: str) -> str:
    """The CodeDeck Web pairing link: ``page`` (an origin's root, ``…/``) with the pairing in its
    fragment (``#pair=<npub>&relays=…&machine=…&token=…``), which a browser never sends to a
    server."""
    joined = ",".join(quote(r, safe="") for r in relays)
    return (
        f"{page}#pair={npub}&relays={joined}"
        f"&machine={quote(machine, safe='')}&token={quote(token, safe='')}"
    )


class DaemonControl:
    """The :class:`~bridge.control.methods.ControlHandler` of a running daemon.

    Args:
        engine: read through its queries.
        pool: the relay pool (its status).
        keypair: the bridge identity (npub).
        machine: the machine name.
        home: the bridge home (status).
        public_relays: the relays phones are told about (the embedded relay's public URL).
        embedded_url: the embedded relay's public URL, when one is served.
        web_client_url: the page of CodeDeck Web the user hosts (``web_client_url``), which
            the web pairing link opens instead of the embedded relay's.
        feed: puts an input on the engine's queue.
        pending_inputs: how many inputs wait for the engine (a just-opened window may still be
            in the queue).
        wall: unix seconds.
        registration: the private relay's admin API, when configured.
        on_change: called after every notification (the ``STATUS=`` refresh).
    """

    def __init__(
        self,
        *,
        engine: Engine,
        pool: RelayPool,
        keypair: Keypair,
        machine: str,
        home: str,
        public_relays: Sequence[str],
        embedded_url: str | None,
        feed: Callable[[Input], None],
        web_client_url: str | None = None,
        pending_inputs: Callable[[], int],
        wall: Callable[[], float],
        registration: RelayRegistration | None = None,
        on_change: Callable[[], None] | None = None,
        sandbox: str | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._engine = engine
        self._pool = pool
        self._keypair = keypair
        self._machine = machine
        self._home = home
        self._public_relays = list(public_relays)
        self._embedded_url = embedded_url
        self._web_page = web_client_url or (web_page_of(embedded_url) if embedded_url else None)
        self._feed = feed
        self._pending_inputs = pending_inputs
        self._wall = wall
        self._registration = registration
        self._on_change = on_change
        self._started_at = wall()
        self._waiters: list[asyncio.Future[PairWaitResult]] = []
        self._closing: set[str] = set()
        """Sessions whose close is queued: a second ``sessions.close`` does not queue it again."""
        self.tasks: DaemonTasks | None = None
        """The editor's tasks (set by the daemon once its store and engine loop exist)."""

    # --- notifications from the engine ----------------------------------------------------

    def notify(self, effect: Notify) -> None:
        """A ``Notify`` effect: wake ``pair.wait`` callers, register a paired phone, close the
        relay's window when the bridge's closed."""
        result: PairWaitResult
        if effect.event == "paired":
            if self._registration is not None and effect.data.get("npub"):
                pubkey = npub_to_hex(effect.data["npub"])
                self._registration.register(pubkey, effect.data.get("label", ""))
            if self._engine.pairing_window_until() is None:  # paired through the window
                self._close_relay_window()
            result = {
                "paired": True,
                "label": effect.data.get("label", ""),
                "npub": effect.data.get("npub", ""),
            }
        elif effect.event == "pairing-closed":
            result = {"paired": False, "reason": effect.data.get("reason", "closed")}
            if result["reason"] == "expired":  # ("closed": pair.open replaces it at once)
                self._close_relay_window()
        else:
            return
        self._resolve(result)
        if self._on_change is not None:
            self._on_change()

    def _close_relay_window(self) -> None:
        if self._registration is not None:
            self._registration.close_window(self._keypair.public_hex)

    def close(self) -> None:
        """Shutdown: every ``pair.wait`` ends with ``closed``."""
        self._resolve({"paired": False, "reason": "closed"})

    def _resolve(self, result: PairWaitResult) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(result)

    def status_line(self, running_sessions: int) -> str:
        """The ``STATUS=`` text systemd shows."""
        states = self._pool.status()
        connected = sum(1 for s in states if s.state.value == "open")
        phones = len(self._engine.paired_phones())
        return (
            f"relays {connected}/{len(states)} connected, {phones} phone(s), "
            f"{running_sessions} running session(s)"
        )

    # --- the control methods --------------------------------------------------------------

    async def status(self) -> StatusResult:
        relays: list[RelayInfo] = [
            {
                "url": s.url,
                "state": s.state.value,
                "lastEventAt": iso_timestamp(s.last_event_at) if s.last_event_at else None,
                "lastError": s.last_error,
            }
            for s in self._pool.status()
        ]
        last = self._engine.last_command_at
        result: StatusResult = {
            "pid": os.getpid(),
            "startedAt": iso_timestamp(self._started_at),
            "version": __version__,
            "npub": self._keypair.npub,
            "machine": self._machine,
            "home": self._home,
            "relays": relays,
            "embeddedRelay": self._embedded_url,
            "phones": await self.phones_list(),
            "sessions": await self.sessions_list(),
            "lastCommandAt": iso_timestamp(last) if last else None,
            "hosts": {"running": len(running_hosts(Path(self._home)))},
        }
        if self._sandbox is not None:
            result["sandbox"] = self._sandbox
        return result

    async def pair_open(self, duration: float) -> PairOpenResult:
        token = os.urandom(16).hex()
        now = self._wall()
        self.notify(Notify("pairing-closed", {"reason": "closed"}))  # a replaced window
        self._feed(PairingWindowRequested(token, duration))
        if self._registration is not None:
            self._registration.open_window(self._keypair.public_hex, now, duration)
        return {
            "url": pair_url(self._keypair.npub, self._public_relays, self._machine, token),
            "npub": self._keypair.npub,
            "token": token,
            "relays": list(self._public_relays),
            "machine": self._machine,
            "expiresAt": iso_timestamp(now + duration),
            "webUrl": web_pair_link(
                self._web_page, self._keypair.npub, self._public_relays, self._machine, token
            )
            if self._web_page is not None
            else None,
        }

    async def pair_wait(self, timeout: float) -> PairWaitResult:
        if self._engine.window_for(self._wall()) is None and not self._pending_inputs():
            return {"paired": False, "reason": "no-window"}
        waiter: asyncio.Future[PairWaitResult] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(waiter)
        except TimeoutError:
            return {"paired": False, "reason": "timeout"}
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    async def pair_npub(self, pubkey: str, label: str) -> PairNpubResult:
        already = self._engine.phone(pubkey) is not None
        self._feed(PhonePairedManually(pubkey, label or "Phone"))
        return {"npub": hex_to_npub(pubkey), "label": label or "Phone", "alreadyPaired": already}

    async def phones_list(self) -> list[PhoneInfo]:
        return [
            {"npub": p.npub, "label": p.label, "pairedAt": p.paired_at}
            for p in self._engine.paired_phones()
        ]

    async def phones_unpair(self, pubkey: str) -> UnpairResult:
        phone = self._engine.phone(pubkey)
        if phone is None:
            return {"unpaired": False, "npub": hex_to_npub(pubkey)}
        self._feed(PhoneUnpaired(pubkey))
        if self._registration is not None:
            self._registration.unregister(pubkey)
        return {"unpaired": True, "npub": phone.npub, "label": phone.label}

    async def sessions_list(self) -> list[SessionInfo]:
        home = Path(self._home)
        return [
            {
                "sessionId": r.session_id,
                "state": r.state,
                "title": r.title,
                "cwd": r.cwd,
                "host": session_host(home, r.session_id),
            }
            for r in self._engine.session_records()
        ]

    async def sessions_close(self, session_id: str | None, close_all: bool) -> SessionsCloseResult:
        known = [r.session_id for r in self._engine.session_records()]
        self._closing &= set(known)  # the engine removed those it closed
        if close_all:
            chosen = known
        elif session_id in known:
            chosen = [session_id]
        else:
            raise HandlerError(
                f"there is no session {safe_text(session_id, limit=80)}; "
                "`codedeck-bridge sessions` lists them"
            )
        for sid in chosen:
            if sid not in self._closing:
                self._closing.add(sid)
                self._feed(SessionCloseRequested(sid))
        return {"closed": chosen}

    # --- the Desiide orchestrator's tasks (bridge.runtime.edges.control_tasks) -------------------

    async def tasks_start(
        self,
        session_id: str,
        cwd: str,
        instruction: str,
        allowed_tools: tuple[str, ...],
        max_tool_calls: int,
        title: str | None,
        model: str | None,
        strict: bool,
        judge: bool,
    ) -> TaskStartResult:
        return await self._tasks().start(
            session_id, cwd, instruction, allowed_tools, max_tool_calls, title, model, strict, judge
        )

    async def tasks_watch(
        self, cursors: Mapping[str, tuple[int, frozenset[str], str | None]], timeout: float
    ) -> TasksWatchResult:
        return await self._tasks().watch(cursors, timeout)

    async def tasks_answer(
        self, session_id: str, card_id: str, allow: bool, scope: str | None, reason: str | None
    ) -> QueuedResult:
        return await self._tasks().answer(session_id, card_id, allow, scope, reason)

    async def tasks_report(
        self, session_id: str, card_id: str, report: tuple[dict[str, str], ...]
    ) -> QueuedResult:
        return await self._tasks().report(session_id, card_id, report)

    async def tasks_input(self, session_id: str, text: str) -> QueuedResult:
        return await self._tasks().input(session_id, text)

    async def tasks_stop(self, session_id: str) -> QueuedResult:
        return await self._tasks().stop(session_id)

    def _tasks(self) -> DaemonTasks:
        if self.tasks is None:
            raise HandlerError("this daemon does not serve editor tasks")
        return self.tasks
