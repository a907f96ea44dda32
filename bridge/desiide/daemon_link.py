"""The orchestrator's link to the bridge daemon of its home: where its tasks run as sessions.

Tasks are sessions of the daemon that serves this home, so that paired phones see them, follow
their output and answer their cards (``DESIIDE.md``, "Tasks are sessions"). The orchestrator
drives them with the control socket's ``tasks.*`` methods (:mod:`bridge.control.task_methods`)
over two connections: one for commands and one for the ``tasks.watch`` long poll (a control
connection answers one request at a time, and a watch waits).

With no daemon running, :meth:`DaemonLink.open` starts one **in this process**, for the
orchestrator's lifetime — the same daemon, the same store, the same control socket — and connects
to it exactly as it would to a daemon of its own; there is one code path, not two. Closing the
link stops that daemon (its sessions' hosts stop with it, as when ``codedeck-bridge run`` stops).

The daemon is started with its signal handlers off: SIGTERM and stdin's end belong to the
orchestrator, which cancels its tasks before it stops the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from bridge import __version__
from bridge.config import Settings
from bridge.control.client import ControlClient, ControlError, DaemonNotRunning
from bridge.tasks import TaskSet

__all__ = ["DaemonLink", "DaemonLinkError"]

logger = logging.getLogger(__name__)

CLIENT_NAME: Final = "codedeck-bridge-desiide"
START_TIMEOUT: Final = 60.0
"""How long an in-process daemon may take to open its control socket."""
WATCH_TIMEOUT: Final = 25.0
CALL_TIMEOUT: Final = 30.0


class DaemonLinkError(Exception):
    """The daemon cannot be reached or started; the message says why and what to do."""


class DaemonLink:
    """Commands and the watch, over the control socket (see the module docstring)."""

    def __init__(
        self,
        commands: ControlClient,
        watcher: ControlClient,
        daemon: asyncio.Task[None] | None,
        stop: asyncio.Event | None,
    ) -> None:
        self._commands = commands
        self._watcher = watcher
        self._daemon = daemon
        self._stop = stop

    @property
    def in_process(self) -> bool:
        """Whether this link started the daemon in this process."""
        return self._daemon is not None

    @classmethod
    async def open(
        cls, home: Path, *, start: bool = True, extra_roots: Sequence[str] = ()
    ) -> DaemonLink:
        """Connect to the daemon of `home`, starting one in this process when none runs.

        Args:
            home: the bridge home.
            start: start a daemon when none runs (False: fail instead).
            extra_roots: folders to add to the in-process daemon's workspace roots (the
                editor's workspace), so that its folder listing shows them to phones.

        Raises:
            DaemonLinkError: nothing answers and a daemon could not be started.
        """
        try:
            commands = await _connect(home)
        except DaemonNotRunning:
            if not start:
                raise DaemonLinkError(
                    f"no bridge daemon runs for {home}; start one with `codedeck-bridge run`"
                ) from None
            return await cls._start_in_process(home, extra_roots)
        except ControlError as exc:
            raise DaemonLinkError(str(exc)) from None
        try:
            watcher = await _connect(home)
        except ControlError as exc:
            await commands.close()
            raise DaemonLinkError(str(exc)) from None
        logger.info("tasks run in the bridge daemon of %s", home)
        return cls(commands, watcher, None, None)

    @classmethod
    async def _start_in_process(cls, home: Path, extra_roots: Sequence[str]) -> DaemonLink:
        from bridge.config import ConfigError, load_settings
        from bridge.runtime.daemon import run_daemon  # only when no daemon runs

        env = dict(os.environ)
        try:
            settings = load_settings(flags={"home": str(home)}, env=env)
        except ConfigError as exc:
            raise DaemonLinkError(f"the bridge's configuration is unusable: {exc}") from None
        if extra_roots:
            roots = list(dict.fromkeys([*map(str, settings.workspaces), *extra_roots]))
            settings = _with_roots(settings, roots)
        stop = asyncio.Event()
        # Owned by a task set of its own, which logs a crash however the link ends; the link
        # awaits the task when it closes.
        daemon = TaskSet("the desiide link", logger=logger).spawn(
            run_daemon(settings, stop=stop, install_signals=False), "in-process daemon"
        )
        assert daemon is not None  # a new set is open
        logger.info("no bridge daemon runs for %s: running one in this process", home)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT
        while True:
            if daemon.done():
                failure = daemon.exception()
                raise DaemonLinkError(
                    f"the bridge daemon could not start: {failure or 'it stopped at once'}"
                )
            try:
                commands = await _connect(home)
                watcher = await _connect(home)
            except ControlError:
                if loop.time() > deadline:
                    stop.set()
                    with contextlib.suppress(BaseException):
                        await daemon
                    raise DaemonLinkError(
                        f"the bridge daemon did not open its control socket in {START_TIMEOUT:g} s"
                    ) from None
                await asyncio.sleep(0.05)
                continue
            return cls(commands, watcher, daemon, stop)

    async def close(self) -> None:
        """Close both connections; stop the in-process daemon, if this link started one."""
        await self._commands.close()
        await self._watcher.close()
        if self._daemon is not None and self._stop is not None:
            self._stop.set()
            with contextlib.suppress(Exception):  # its task set logged it
                await self._daemon

    async def call(self, method: str, params: Mapping[str, Any]) -> Any:
        """A ``tasks.*`` command.

        Raises:
            DaemonLinkError: the daemon refused it or is gone (the message says which).
        """
        try:
            return await self._commands.call(method, params, timeout=CALL_TIMEOUT)
        except ControlError as exc:
            raise DaemonLinkError(str(exc)) from None

    async def watch(
        self, cursors: Mapping[str, Mapping[str, Any]], timeout: float = WATCH_TIMEOUT
    ) -> dict[str, Any]:
        """One ``tasks.watch`` long poll: what changed in the watched sessions.

        Raises:
            DaemonLinkError: the daemon is gone.
        """
        try:
            result = await self._watcher.call(
                "tasks.watch",
                {"sessions": dict(cursors), "timeout": timeout},
                timeout=timeout + CALL_TIMEOUT,
            )
        except ControlError as exc:
            raise DaemonLinkError(str(exc)) from None
        sessions = result.get("sessions") if isinstance(result, dict) else None
        return sessions if isinstance(sessions, dict) else {}

    async def daemon_failed(self) -> BaseException | None:
        """For an in-process daemon that ended: why (None while it runs or when none)."""
        if self._daemon is None or not self._daemon.done():
            return None
        if self._daemon.cancelled():
            return asyncio.CancelledError()
        return self._daemon.exception() or DaemonLinkError("the in-process daemon stopped")


async def _connect(home: Path) -> ControlClient:
    return await ControlClient.connect(home, client_name=CLIENT_NAME, client_version=__version__)


def _with_roots(settings: Settings, roots: list[str]) -> Settings:
    return dataclasses.replace(settings, workspaces=tuple(Path(r) for r in roots))
