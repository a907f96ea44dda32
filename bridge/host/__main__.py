"""``python -m bridge.host``: one session host process (started by the daemon, never by hand).

Forks once so that it is not the daemon's child, then reads its launch spec from stdin (one JSON line: :mod:`bridge.host.launch`), takes the session's
journal (its lock says no other host runs this session), binds its socket, starts the agent's
driver, and answers one line on stdout — ``{"ok": true, "pid": …}`` or ``{"ok": false,
"error": …}`` — before it closes stdout. Its stderr is its log file (the daemon opened it).

Exit status: 0 when the session ended (closed, the agent exited, orphaned), 1 when the host
failed (journal, driver), 2 for a bad launch spec, 3 when another host already runs the session.

Imports stay lean: the driver module is imported by name, only the one the agent needs.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Mapping
from typing import cast

import orjson

from bridge.host.driver import DriverError, DriverFactory
from bridge.host.journal import Journal, JournalError, JournalLocked
from bridge.host.launch import LaunchError, LaunchSpec, decode_launch
from bridge.host.layout import HostInfo, HostPaths, host_paths, process_start_time, write_info
from bridge.host.server import SessionHost, bind_socket
from bridge.redaction import SecretsFilter

__all__ = ["DRIVERS", "main"]

DRIVERS = {
    "claude": ("bridge.agents.claude", "claude_driver_factory"),
    "scripted": ("bridge.agents.scripted", "scripted_driver_factory"),
    "acp": ("bridge.agents.acp", "acp_driver_factory"),
}
"""Agent kind → (module, factory name): imported only when that agent runs."""

logger = logging.getLogger("bridge.host")

_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def _answer(payload: dict[str, object]) -> None:
    """The one line on stdout, then stdout is closed (nobody reads it any more)."""
    try:
        sys.stdout.buffer.write(orjson.dumps(payload) + b"\n")
        sys.stdout.buffer.flush()
    except OSError:
        pass  # the daemon gave up waiting; the host goes on and is adopted later
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def _load_factory(agent: str) -> DriverFactory:
    module_name, name = DRIVERS[agent]
    return cast(DriverFactory, getattr(importlib.import_module(module_name), name))


def main() -> int:
    # Detach from the daemon for good: the process the daemon started exits at once (the daemon
    # reaps it), and the host goes on as its child's orphan. A host must never be the daemon's
    # child: it outlives the daemon, and no daemon should have to reap it.
    if os.fork() > 0:
        os._exit(0)
    line = sys.stdin.buffer.readline()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        spec = decode_launch(line)
    except LaunchError as exc:
        _answer({"ok": False, "error": f"bad launch spec: {exc}"})
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # The agent's credentials are in its environment: no log line of the host may show them.
    handler.addFilter(SecretsFilter(_secret_values(spec.driver.env)))
    logging.basicConfig(
        level=getattr(logging, spec.log_level.upper(), logging.INFO), handlers=[handler]
    )
    return _run(spec)


def _secret_values(env: Mapping[str, str]) -> list[str]:
    """The values of the variables that hold credentials (by their name)."""
    return [
        value for name, value in env.items() if any(word in name.upper() for word in _SECRET_WORDS)
    ]


def _run(spec: LaunchSpec) -> int:
    session_id = spec.driver.session_id
    paths = host_paths(spec.home, session_id)
    try:
        journal = Journal.open(paths.journal, floor=spec.seq_floor)
    except JournalLocked:
        _answer({"ok": False, "error": "another session host runs this session", "busy": True})
        return 3
    except JournalError as exc:
        _answer({"ok": False, "error": str(exc)})
        return 1
    try:
        factory = _load_factory(spec.agent)
        sock = bind_socket(paths)
        start_time = process_start_time(os.getpid()) or 0
        write_info(paths, HostInfo(session_id, spec.agent, os.getpid(), start_time))
    except (OSError, ImportError, AttributeError) as exc:
        journal.close()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _answer({"ok": False, "error": f"the session host cannot start: {reason}"})
        return 1
    logger.info(
        "host %s: serving session %s (%s agent), journal seqs %d..%d",
        os.getpid(),
        session_id[:8],
        spec.agent,
        journal.first_seq,
        journal.last_seq,
    )
    return asyncio.run(_serve(spec, paths, journal, factory, sock))


async def _serve(
    spec: LaunchSpec,
    paths: HostPaths,
    journal: Journal,
    factory: DriverFactory,
    sock: socket.socket,
) -> int:
    try:
        host = SessionHost(spec, paths, journal, factory)
    except DriverError as exc:
        journal.close()
        sock.close()
        _answer({"ok": False, "error": f"the agent cannot start: {exc}"})
        return 1
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, host.request_stop)
    return await host.run(sock, lambda: _answer({"ok": True, "pid": os.getpid()}))


if __name__ == "__main__":
    sys.exit(main())
