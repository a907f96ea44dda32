"""A test write policy that runs ``codedeck-relaypolicy plugin`` exactly the way strfry does.

:class:`StrfryPluginPolicy` is a :class:`tests.support.relay.WritePolicyHook` for the loopback
relay. For every event it writes one strfry plugin request to the plugin process and waits for
the answer, with strfry's rules (``src/PluginEventSifter.h``, shared/notes/relays-and-policy.md §1):

* the command is run through ``/bin/sh -c`` with stdin/stdout as pipes, spawned lazily on the
  first event and re-spawned on the next event after a failure;
* strictly one request at a time (a lock), each answer waited for with a timeout;
* output lines that are not JSON are logged and skipped (strfry keeps reading until the timeout),
  and are kept in :attr:`StrfryPluginPolicy.stray_lines` so tests can assert there were none;
* any failure — timeout, EOF, an ``id`` that is not the event's, an unknown action, a response
  line over 8192 bytes — kills the plugin and rejects the event with strfry's
  ``error: internal error`` (fail closed).

Mapping to the relay: ``accept`` → accept; ``reject`` → reject with the plugin's message. The
loopback relay's FFI answers ``OK false "blocked: <msg without its prefix>"``, so a client of the
test relay sees e.g. ``blocked: not a registered user`` where strfry would send the plugin's own
``restricted: not a registered user``; tests assert on the text after the prefix.
``shadowReject`` (OK true, not stored) cannot be expressed through the FFI and is mapped to a
reject; the CodeDeck policy never uses it.

:func:`plugin_command` reads the plugin command line out of ``deploy/relay/strfry.conf`` and
replaces only the program (``codedeck-relaypolicy`` → ``<this python> -m relaypolicy``, since the
project may not be pip-installed) and the two paths (``/data/registry.db`` and
``/etc/codedeck/relaypolicy.toml``) — so the tests run the argument list the container runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson

__all__ = [
    "CONTAINER_CONFIG",
    "CONTAINER_REGISTRY",
    "STRFRY_CONF",
    "PluginFailure",
    "StrfryPluginPolicy",
    "plugin_argv_from_conf",
    "plugin_command",
]

logger = logging.getLogger(__name__)

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
STRFRY_CONF: Final = REPO_ROOT / "deploy" / "relay" / "strfry.conf"
CONTAINER_REGISTRY: Final = "/data/registry.db"
CONTAINER_CONFIG: Final = "/etc/codedeck/relaypolicy.toml"
PROGRAM: Final = "codedeck-relaypolicy"
# strfry: `setMaxRecordSize(8192)` on the plugin's output.
MAX_RESPONSE_LINE: Final = 8192
INTERNAL_ERROR: Final = "error: internal error"

_PLUGIN_LINE = re.compile(r'^\s*plugin\s*=\s*"((?:[^"\\]|\\.)*)"', re.MULTILINE)


def plugin_argv_from_conf(conf: Path = STRFRY_CONF) -> list[str]:
    """The ``relay.writePolicy.plugin`` command of a strfry.conf, split like ``sh`` would."""
    text = conf.read_text()
    block = text[text.index("writePolicy {") :]
    match = _PLUGIN_LINE.search(block)
    if match is None:
        raise ValueError(f"no writePolicy plugin line in {conf}")
    return shlex.split(match.group(1))


def plugin_command(registry: Path, config: Path | None = None, conf: Path = STRFRY_CONF) -> str:
    """The deployment's plugin command, runnable here (see the module docstring).

    Args:
        registry: replaces ``/data/registry.db``.
        config: replaces ``/etc/codedeck/relaypolicy.toml`` (default: the repository's copy,
            ``deploy/relay/relaypolicy.toml``, which the Dockerfile installs there).
    """
    argv = plugin_argv_from_conf(conf)
    if argv[0] != PROGRAM:
        raise ValueError(f"strfry.conf runs {argv[0]!r}, expected {PROGRAM!r}")
    config = config or REPO_ROOT / "deploy" / "relay" / "relaypolicy.toml"
    replaced = {CONTAINER_REGISTRY: str(registry), CONTAINER_CONFIG: str(config)}
    missing = [path for path in replaced if path not in argv]
    if missing:
        raise ValueError(f"strfry.conf's plugin command no longer names {missing}")
    args = [replaced.get(arg, arg) for arg in argv[1:]]
    return shlex.join([sys.executable, "-m", "relaypolicy", *args])


class PluginFailure(Exception):
    """The plugin broke strfry's protocol (timeout, EOF, bad answer)."""


class StrfryPluginPolicy:
    """Runs a strfry write-policy plugin command for the loopback relay.

    Args:
        command: the shell command line (see :func:`plugin_command`).
        timeout: seconds to wait for each answer (strfry's ``timeoutSeconds``).
        clock: unix seconds for ``receivedAt`` (tests may pin it).
        env: extra environment for the plugin (``PYTHONPATH`` is set to the repository).
    """

    def __init__(
        self,
        command: str,
        *,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
        env: dict[str, str] | None = None,
    ) -> None:
        self.command = command
        self.timeout = timeout
        self._clock = clock
        self._env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
        self._lock = asyncio.Lock()
        self._process: asyncio.subprocess.Process | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self.spawns = 0
        self.failures: list[str] = []
        self.stray_lines: list[bytes] = []
        self.stderr_lines: list[str] = []
        self.answers: list[dict[str, Any]] = []

    async def _spawn(self) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._env,
            start_new_session=True,  # its own process group, so kill() reaches the python too
            limit=1 << 20,
        )
        self.spawns += 1
        self._process = process
        self._stderr_task = asyncio.create_task(self._drain_stderr(process))
        return process

    async def _drain_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while line := await process.stderr.readline():
            self.stderr_lines.append(line.decode(errors="replace").rstrip("\n"))

    async def request(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one raw request and return the validated answer (tests of the protocol itself).

        Raises:
            PluginFailure: after killing the plugin, like strfry.
        """
        async with self._lock:
            return await self._exchange(request)

    async def _exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        process = self._process
        if process is None or process.returncode is not None:
            process = await self._spawn()
        assert process.stdin is not None and process.stdout is not None
        event_id = request["event"]["id"]
        try:
            async with asyncio.timeout(self.timeout):
                process.stdin.write(orjson.dumps(request) + b"\n")
                await process.stdin.drain()
                while True:
                    raw = await process.stdout.readline()
                    if not raw:
                        raise PluginFailure("plugin closed its stdout")
                    if len(raw) > MAX_RESPONSE_LINE:
                        raise PluginFailure(f"response line of {len(raw)} bytes")
                    try:
                        answer = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        logger.warning("plugin wrote a line that is not JSON: %r", raw[:200])
                        self.stray_lines.append(raw)
                        continue
                    break
            if not isinstance(answer, dict):
                raise PluginFailure("answer is not a JSON object")
            if answer.get("id") != event_id:
                raise PluginFailure("id mismatch")
            if answer.get("action") not in ("accept", "reject", "shadowReject"):
                raise PluginFailure(f"unknown action {answer.get('action')!r}")
            if not isinstance(answer.get("msg", ""), str):
                raise PluginFailure("msg is not a string")
        except (PluginFailure, TimeoutError, OSError) as exc:
            reason = str(exc) or type(exc).__name__
            logger.warning("plugin failed (%s); killing it", reason)
            self.failures.append(reason)
            await self._kill()
            raise PluginFailure(reason) from exc
        self.answers.append(answer)
        return answer

    async def admit_event(self, event_json: dict[str, Any], source_ip: str) -> tuple[bool, str]:
        """:class:`tests.support.relay.WritePolicyHook`: ask the plugin about one event."""
        request = {
            "type": "new",
            "event": event_json,
            "receivedAt": int(self._clock()),
            "sourceType": "IP6" if ":" in source_ip else "IP4",
            "sourceInfo": source_ip,
        }
        try:
            answer = await self.request(request)
        except PluginFailure:
            return False, INTERNAL_ERROR
        if answer["action"] == "accept":
            return True, ""
        return False, str(answer.get("msg", ""))

    async def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        if self._stderr_task is not None:
            await self._stderr_task
            self._stderr_task = None

    async def close(self) -> int | None:
        """Close the plugin's stdin (it exits at EOF) and wait; kill it if it lingers.

        Returns:
            The plugin's exit status, or None if it had to be killed.
        """
        async with self._lock:
            process = self._process
            if process is None:
                return None
            assert process.stdin is not None
            process.stdin.close()
            try:
                async with asyncio.timeout(10):
                    status = await process.wait()
            except TimeoutError:
                await self._kill()
                return None
            self._process = None
            if self._stderr_task is not None:
                await self._stderr_task
                self._stderr_task = None
            return status
