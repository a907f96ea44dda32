"""Starting, finding and stopping session hosts (the daemon's side of their processes).

A host is started as ``python -m bridge.host`` in a new session (``setsid``: a Ctrl-C in the
daemon's terminal does not reach it), forks once and is nobody's child from then on: it outlives
the daemon by design. Under systemd the unit's ``KillMode=process`` keeps ``systemctl stop`` and
``restart`` from killing hosts with the daemon (see ``deploy/systemd``); ``sessions close`` and
``service uninstall`` end them on purpose.

- :meth:`HostLauncher.spawn` writes the launch spec (the agent's environment included) on the
  host's stdin and waits for its one-line answer; the host's stderr goes to its log file
  (``host.log``, cut back when it passes 1 MiB).
- :meth:`HostLauncher.kill` signals a host only when ``host.json``'s pid, the pid's start time
  and its command line all match (pids are reused).
- :func:`host_environment` is what the host process itself runs with: enough to find Python
  and the project, nothing secret (the agent's environment travels in the launch spec).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import orjson

from bridge.agents.workspace_tools.leftovers import reap_host
from bridge.host.launch import LaunchSpec, encode_launch
from bridge.host.layout import (
    HOST_MODULE,
    HostInfo,
    HostPaths,
    host_alive,
    host_paths,
    list_host_dirs,
    read_info,
)

__all__ = [
    "HostBusy",
    "HostLaunchError",
    "HostLauncher",
    "host_environment",
    "kill_host",
    "stop_host",
    "wait_gone",
]

logger = logging.getLogger(__name__)

SPAWN_TIMEOUT: Final = 30.0
"""Seconds a new host may take to answer (Python start, imports, journal, socket)."""
LOG_CAP: Final = 1024 * 1024
"""A host log past this size is cut back (to its last quarter) when the next host starts."""
STOP_WAIT: Final = 10.0
_HOST_ENV: Final = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "TMPDIR")


class HostLaunchError(Exception):
    """A host could not be started; the text is user-readable."""


class HostBusy(HostLaunchError):
    """Another host already runs the session (it holds the journal's lock)."""


def host_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The host process's own environment: what Python needs, nothing secret."""
    env = {name: environ[name] for name in _HOST_ENV if name in environ}
    env["PYTHONUNBUFFERED"] = "1"
    return env


class HostLauncher:
    """Hosts of one bridge home.

    Args:
        home: the bridge home.
        python: the interpreter hosts run on (this one).
        environ: where :func:`host_environment` takes its few variables.
    """

    def __init__(
        self,
        home: Path,
        *,
        python: str = sys.executable,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.home = Path(home)
        self._python = python
        self._environ = dict(os.environ if environ is None else environ)

    def paths(self, session_id: str) -> HostPaths:
        return host_paths(self.home, session_id)

    async def spawn(self, spec: LaunchSpec) -> int:
        """Start a host for ``spec.driver.session_id``; its pid once it serves.

        Raises:
            HostBusy: a host already runs the session.
            HostLaunchError: it could not start (the reason says why).
        """
        paths = self.paths(spec.driver.session_id)
        try:
            paths.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(paths.root.parent, 0o700)
            log_fd = _open_log(paths.log)
        except OSError as exc:
            raise HostLaunchError(
                f"cannot prepare the session host's directory {paths.root}: {exc.strerror}"
            ) from None
        try:
            process = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                HOST_MODULE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log_fd,
                start_new_session=True,
                cwd=str(paths.root),
                env=host_environment(self._environ),
            )
        except OSError as exc:
            raise HostLaunchError(f"cannot start a session host: {exc.strerror}") from None
        finally:
            os.close(log_fd)
        assert process.stdin is not None and process.stdout is not None
        try:
            async with asyncio.timeout(SPAWN_TIMEOUT):
                process.stdin.write(encode_launch(spec))
                await process.stdin.drain()
                process.stdin.close()
                line = await process.stdout.readline()
                await process.wait()  # the first process exits at once (the host forked)
        except (TimeoutError, OSError, ConnectionError) as exc:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            raise HostLaunchError(
                f"the session host did not start ({type(exc).__name__}); see {paths.log}"
            ) from None
        return _answer(line, paths)

    async def kill(self, session_id: str, *, remove: bool = False) -> bool:
        """Stop the host of `session_id` if it runs (SIGTERM, then SIGKILL after a wait).

        Args:
            remove: delete the host's directory afterwards (the session is gone).

        Returns:
            Whether a live host was found.
        """
        paths = self.paths(session_id)
        found = await stop_host(paths)
        if remove:
            reap_host(paths.root)  # commands a dead host left running
            shutil.rmtree(paths.root, ignore_errors=True)
        return found

    def orphans(self, known: set[str]) -> list[HostPaths]:
        """Host directories of sessions not in `known` (closed while no daemon ran, or junk)."""
        out = []
        for paths in list_host_dirs(self.home):
            info = read_info(paths)
            if info is None or info.session_id not in known:
                out.append(paths)
        return out


async def stop_host(paths: HostPaths, wait: float = STOP_WAIT) -> bool:
    """SIGTERM the host of `paths` if it is alive, SIGKILL it after `wait` s; whether it was."""
    info = read_info(paths)
    if info is None or not host_alive(info):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(info.pid, signal.SIGTERM)
    if not await wait_gone(info, wait):
        logger.warning("! session host %d did not stop; killing it", info.pid)
        kill_host(info)
        await wait_gone(info, wait)
    return True


async def wait_gone(info: HostInfo, timeout: float) -> bool:
    """Wait until the host `info` names has exited; False when `timeout` passed first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while host_alive(info):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def kill_host(info: HostInfo) -> None:
    """SIGKILL a host (checked to be that host) and its process group, its agent with it."""
    if not host_alive(info):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(os.getpgid(info.pid), signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(info.pid, signal.SIGKILL)


def _open_log(path: Path) -> int:
    """The host log for appending (0600), cut back to its last quarter when past the cap."""
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_size > LOG_CAP:
            tail = path.read_bytes()[-LOG_CAP // 4 :]
            path.write_bytes(tail)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _answer(line: bytes, paths: HostPaths) -> int:
    try:
        answer = orjson.loads(line) if line else None
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict):
        raise HostLaunchError(f"the session host exited without answering; see {paths.log}")
    if answer.get("ok") is True and isinstance(answer.get("pid"), int):
        return int(answer["pid"])
    error = str(answer.get("error") or "unknown error")
    if answer.get("busy"):
        raise HostBusy(error)
    raise HostLaunchError(error)
