"""``codedeck-bridge sessions close ID`` / ``sessions close --all``: end sessions on purpose.

Sessions outlive the daemon: each runs in a session host (``python -m bridge.host``) that a
stop, a crash or an upgrade of the daemon leaves running. This command is how they end, with
or without a daemon:

- **A daemon answers on the control socket.** ``sessions.close`` queues one
  ``SessionCloseRequested`` per session, which the engine handles as a phone's ``close-session``
  (the session's rows, a tombstone, the ack and heartbeat to the phones, the runner told to
  close: the host stops its agent and removes its files). The command then waits, at most
  `CLOSE_WAIT` seconds, until the daemon no longer lists those sessions *and* their hosts are
  gone (``host.json`` and ``/proc``), so "closed" is printed only once it is true.
- **No daemon runs** (its lock is free). The command takes the home's lock itself, so no
  daemon starts meanwhile, removes the sessions from the store in one transaction (the same rows
  as the engine's close, tombstones included: the phones see the sessions removed at the next
  start), then stops their hosts (SIGTERM, SIGKILL after a wait) and deletes their directories;
  with ``--all`` also every host left under the home. The store goes first: a command that dies
  half-way leaves hosts whose session is gone, which the next daemon stops at its start.
- **A process holds the lock but does not answer** (a daemon starting, stopping or stuck):
  nothing is done, and the message says so.

`close_sessions` is the whole operation without printing (``service uninstall`` uses it);
`run_sessions_close` is the CLI around it. Exit status: 0 done, 1 failed (an unknown id, a
daemon that does not answer, hosts still running after the wait), 130 on Ctrl-C.

The store, the engine's vocabulary and the host launcher are imported only on the path without
a daemon: every CLI command imports this package, and they would double its start-up time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Final

from bridge.agents.workspace_tools.leftovers import reap_host
from bridge.control.client import ControlClient, ControlError, DaemonNotRunning, RemoteError
from bridge.control.hosts import live_host_pids
from bridge.control.rpc import METHOD_NOT_FOUND
from bridge.control.terminal_text import safe_text
from bridge.host.layout import HostPaths, host_paths, list_host_dirs
from bridge.records import record
from store.errors import AlreadyRunning, StoreError
from store.lock import acquire_lock

__all__ = [
    "CLOSE_WAIT",
    "CloseError",
    "ClosedSessions",
    "SessionsStillOpen",
    "close_sessions",
    "closed_json",
    "closed_lines",
    "run_sessions_close",
]

CLOSE_WAIT: Final = 45.0
"""Seconds the command waits for the daemon to close the sessions and their hosts to exit. A
host gets 20 s to stop its agent before the daemon kills it (10 s more at worst), so this covers
the slowest agent with a margin for a busy engine queue."""
_POLL: Final = 0.1
EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_INTERRUPTED: Final = 130


class CloseError(ControlError):
    """The sessions could not be closed; the message says why and what to do."""


class SessionsStillOpen(CloseError):
    """The daemon took the close, but sessions or hosts were still there after the wait.

    Attributes:
        closed: the ids the daemon is closing.
        alive: session id → pid of a host still running.
        listed: ids the daemon still lists.
    """

    def __init__(
        self, home: Path, closed: list[str], alive: dict[str, int], listed: set[str], wait: float
    ) -> None:
        self.closed = closed
        self.alive = alive
        self.listed = listed
        parts = []
        for session_id, pid in sorted(alive.items()):
            log = host_paths(home, session_id).log
            parts.append(
                f"the host of {safe_text(session_id, limit=80)} (pid {pid}) still runs "
                f"(its log: {log}; stop it with `kill {pid}`)"
            )
        waiting = sorted(listed - set(alive))
        if waiting:
            ids = ", ".join(safe_text(s, limit=80) for s in waiting)
            parts.append(f"the daemon has not closed {ids} yet (check its log)")
        super().__init__(
            f"the daemon is closing {len(closed)} session(s), but after {wait:g} s "
            + "; ".join(parts)
        )


@record
class ClosedSessions:
    """What `close_sessions` did.

    Attributes:
        closed: the ids of the sessions closed.
        daemon: True when a running daemon closed them, False when the store was changed
            directly (no daemon ran).
        hosts_stopped: session hosts that were running and are gone now (without a daemon,
            left-over hosts of sessions the store no longer had are counted too).
    """

    closed: tuple[str, ...]
    daemon: bool
    hosts_stopped: int


async def close_sessions(
    home: Path, session_id: str | None, *, wait: float | None = None
) -> ClosedSessions:
    """Close `session_id`, or every session when it is None (see the module docstring).

    Args:
        home: the bridge home.
        session_id: the session to close; None closes them all.
        wait: seconds to wait for a daemon's close to finish (default `CLOSE_WAIT`).

    Raises:
        SessionsStillOpen: a daemon took the close but did not finish it within `wait`.
        CloseError: an unknown id, a daemon that does not answer, a store that cannot be used.
        ControlError: the daemon could not be reached or refused (the message says why).
    """
    try:
        client = await ControlClient.connect(home)
    except DaemonNotRunning:
        return await close_without_daemon(home, session_id)
    async with client:
        return await close_through_daemon(
            client, home, session_id, CLOSE_WAIT if wait is None else wait
        )


async def close_through_daemon(
    client: ControlClient, home: Path, session_id: str | None, wait: float
) -> ClosedSessions:
    """``sessions.close`` on a running daemon, then wait until the sessions and hosts are gone."""
    try:
        result: Any = await client.sessions_close(session_id)
    except RemoteError as exc:
        if exc.code == METHOD_NOT_FOUND:
            version = client.server.get("version", "?")
            raise CloseError(
                f"the running daemon (codedeck-bridge {safe_text(version)}) cannot close "
                "sessions; restart it so that it runs this version"
            ) from None
        raise
    closed = result.get("closed") if isinstance(result, dict) else None
    if not isinstance(closed, list) or not all(isinstance(s, str) for s in closed):
        raise CloseError("the daemon's sessions.close answer is malformed; update codedeck-bridge")
    hosts = len(live_host_pids(home, closed))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        alive = live_host_pids(home, closed)
        sessions = await client.sessions_list()
        listed = {s.get("sessionId") for s in sessions if isinstance(s, dict)} & set(closed)
        if not alive and not listed:
            return ClosedSessions(tuple(closed), daemon=True, hosts_stopped=hosts)
        if loop.time() >= deadline:
            raise SessionsStillOpen(home, closed, alive, {str(s) for s in listed}, wait)
        await asyncio.sleep(_POLL)


async def close_without_daemon(home: Path, session_id: str | None) -> ClosedSessions:
    """Close sessions while no daemon runs: the store, then the hosts, holding the home's lock."""
    if not home.is_dir():
        if session_id is not None:
            raise CloseError(
                f"there is no session {safe_text(session_id, limit=80)}: {home} does not "
                "exist (check --home)"
            )
        return ClosedSessions((), daemon=False, hosts_stopped=0)
    try:
        lock = acquire_lock(home)
    except AlreadyRunning as exc:
        pid = exc.pid if exc.pid is not None else "unknown"
        stop = f", or stop it (`kill {exc.pid}`) and run this again" if exc.pid else ""
        raise CloseError(
            f"a codedeck-bridge process (pid {pid}) holds {home} but does not answer on its "
            f"control socket (it is starting, stopping or stuck): retry in a moment{stop}"
        ) from None
    except StoreError as exc:
        raise CloseError(str(exc)) from None
    with lock:
        closed = await _remove_from_store(home, session_id)
        targets: dict[Path, HostPaths] = {}
        for sid in closed:
            paths = host_paths(home, sid)
            targets[paths.root] = paths
        if session_id is None:
            for paths in list_host_dirs(home):
                targets.setdefault(paths.root, paths)
        stopped = await asyncio.gather(*(_stop_and_remove(p) for p in targets.values()))
    return ClosedSessions(tuple(closed), daemon=False, hosts_stopped=sum(stopped))


async def _remove_from_store(home: Path, session_id: str | None) -> list[str]:
    """Delete the chosen sessions from the store (one transaction); their ids."""
    from bridge.engine.sessions.rules import PENDING_STATE
    from store import bridge_state
    from store.db import BRIDGE_DB_FILENAME, open_bridge_db

    if not (home / BRIDGE_DB_FILENAME).exists():
        stored: list[tuple[str, str | None]] = []
    else:
        try:
            db = await open_bridge_db(home)
        except StoreError as exc:
            raise CloseError(str(exc)) from None
        try:
            stored = await bridge_state.stored_sessions(db)
            chosen = [s for s in stored if session_id is None or s[0] == session_id]
            if chosen:
                # A pending session (being created) was never listed: no tombstone, as the
                # engine's own close.
                await bridge_state.remove_sessions(
                    db, [(sid, state != PENDING_STATE) for sid, state in chosen]
                )
        except StoreError as exc:
            raise CloseError(f"cannot close the sessions in {home}: {exc}") from None
        finally:
            await db.close()
    ids = [sid for sid, _ in stored]
    if session_id is not None and session_id not in ids:
        known = ", ".join(safe_text(s, limit=40) for s in ids[:5]) + (", …" if len(ids) > 5 else "")
        raise CloseError(
            f"there is no session {safe_text(session_id, limit=80)} in {home}"
            + (f" (its sessions: {known})" if ids else " (it has no session)")
        )
    return [sid for sid in ids if session_id is None or sid == session_id]


async def _stop_and_remove(paths: HostPaths) -> bool:
    """Stop the host of `paths` if it runs, then delete its directory; whether it ran."""
    from bridge.runtime.hosts.launcher import stop_host

    stopped = await stop_host(paths)
    reap_host(paths.root)  # commands a dead host left running
    shutil.rmtree(paths.root, ignore_errors=True)
    return stopped


def closed_json(result: ClosedSessions) -> dict[str, Any]:
    """The ``--json`` form of `result`."""
    return {
        "closed": list(result.closed),
        "daemon": result.daemon,
        "hostsStopped": result.hosts_stopped,
    }


def closed_lines(result: ClosedSessions, home: Path) -> list[str]:
    """What the command prints about `result`."""
    ids = [f"  {safe_text(s, limit=120)}" for s in result.closed]
    if result.daemon:
        if not result.closed:
            return ["No session to close."]
        return [
            f"Closed {len(result.closed)} session(s) through the running daemon; their hosts "
            "have stopped and the phones are told:",
            *ids,
        ]
    if not result.closed:
        if result.hosts_stopped:
            return [
                f"No session in the store of {home} (no codedeck-bridge runs for it); stopped "
                f"{result.hosts_stopped} session host(s) left over."
            ]
        return [f"No session to close (no codedeck-bridge runs for {home})."]
    return [
        f"No codedeck-bridge runs for {home}: closed {len(result.closed)} session(s) in its "
        f"store and stopped {result.hosts_stopped} session host(s):",
        *ids,
        "The phones see them removed when the bridge starts next.",
    ]


def run_sessions_close(args: argparse.Namespace, home: Path) -> int:
    """``sessions close ID | --all [--json]``; returns the exit status."""
    session_id = None if args.all else args.session_id
    try:
        result = asyncio.run(close_sessions(home, session_id))
    except SessionsStillOpen as exc:
        if args.json:
            body = {"closed": exc.closed, "daemon": True, "stillRunning": exc.alive}
            sys.stdout.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
        print(f"codedeck-bridge: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except ControlError as exc:
        print(f"codedeck-bridge: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(
            "\nInterrupted. A running daemon goes on closing what it was asked to; "
            "`codedeck-bridge sessions` shows what is left.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if args.json:
        sys.stdout.write(json.dumps(closed_json(result), indent=2, ensure_ascii=False) + "\n")
    else:
        print("\n".join(closed_lines(result, home)))
    return EXIT_OK
