"""A recording ACP client for driving real agents (OpenCode, Gemini CLI) with the official SDK.

The raw-ACP end-to-end tests (``tests/e2e/acp``) talk to the agents with nothing of the bridge in
between, so that what they assert is what the agents do. :class:`RecordingClient` is the client
side of ``acp.spawn_agent_process``: it keeps every ``session/update`` as the wire JSON
(``model_dump(by_alias=True)``, so assertions read like the protocol), every
``session/request_permission`` with its options, and every ``fs/write_text_file`` call, and it
answers permission requests by option **kind** (``allow_once``, ``reject_once``, …; the option
ids differ between agents: ``once``/``reject`` for OpenCode, ``proceed_once``/``cancel`` for
Gemini CLI). With ``choose=None`` a permission request is held open until the test answers it
(:meth:`RecordingClient.answer`), which is how a cancel during a pending permission is tested.

:func:`run_agent` spawns the agent with the FULL environment the caller built (the SDK otherwise
passes only HOME, LOGNAME, PATH, SHELL, TERM and USER), its stderr into a log file (the SDK's
default is a pipe nobody reads, which can block a chatty agent), and guarantees that nothing
survives the block: the SDK closes stdin, then terminates and kills the agent; the descendants the
agent started (shells of tool calls) are collected from ``/proc`` while it runs and killed after.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp import schema
from acp.client.connection import ClientSideConnection

__all__ = ["AgentRun", "PermissionAsk", "RecordingClient", "descendants", "run_agent"]


def _wire(model: Any) -> dict[str, Any]:
    dumped = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert isinstance(dumped, dict)
    return dumped


@dataclass
class PermissionAsk:
    """One ``session/request_permission`` the agent sent, and how it was answered."""

    session_id: str
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]
    received_at: float
    answer: asyncio.Future[str | None] = field(repr=False)
    """Resolves to the chosen optionId, or None for the ``cancelled`` outcome."""

    def option(self, kind: str) -> str:
        """The optionId of the first option of `kind` (``allow_once``, ``reject_once``, …)."""
        for option in self.options:
            if option.get("kind") == kind:
                return str(option["optionId"])
        raise LookupError(f"no option of kind {kind!r} in {self.options}")


class RecordingClient:
    """The ACP client side (see the module docstring); implements ``acp.Client``."""

    def __init__(self, choose: str | None = "allow_once") -> None:
        self.choose = choose
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.asks: list[PermissionAsk] = []
        self.fs_writes: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    # -- acp.Client ---------------------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, _wire(update)))
        self._poke()

    async def request_permission(
        self,
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
        **kwargs: Any,
    ) -> schema.RequestPermissionResponse:
        ask = PermissionAsk(
            session_id,
            _wire(tool_call),
            [_wire(o) for o in options],
            time.monotonic(),
            asyncio.get_running_loop().create_future(),
        )
        self.asks.append(ask)
        if self.choose is not None:
            ask.answer.set_result(ask.option(self.choose))
        self._poke()
        chosen = await ask.answer
        if chosen is None:
            return schema.RequestPermissionResponse(
                outcome=schema.DeniedOutcome(outcome="cancelled")
            )
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> schema.WriteTextFileResponse:
        # OpenCode 1.18.33 calls this after an edit even though the client declared
        # fs.writeTextFile=false; it has already written the file itself.
        self.fs_writes.append({"sessionId": session_id, "path": path, "content": content})
        self._poke()
        return schema.WriteTextFileResponse()

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> schema.ReadTextFileResponse:
        raise acp.RequestError.method_not_found("fs/read_text_file")

    # Terminals and elicitation are not offered (client capabilities say so): refuse them.

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[schema.EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> schema.CreateTerminalResponse:
        raise acp.RequestError.method_not_found("terminal/create")

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.TerminalOutputResponse:
        raise acp.RequestError.method_not_found("terminal/output")

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.ReleaseTerminalResponse | None:
        raise acp.RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.WaitForTerminalExitResponse:
        raise acp.RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.KillTerminalResponse | None:
        raise acp.RequestError.method_not_found("terminal/kill")

    async def create_elicitation(
        self, message: str, mode: schema.ElicitationMode, **kwargs: Any
    ) -> schema.CreateElicitationResponse:
        raise acp.RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None

    # -- for tests ----------------------------------------------------------------------------

    def answer(self, ask: PermissionAsk, kind: str | None) -> None:
        """Answer a held request: the option of `kind`, or ``cancelled`` when None."""
        ask.answer.set_result(None if kind is None else ask.option(kind))

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The updates whose ``sessionUpdate`` is `kind`, in order."""
        return [u for _, u in self.updates if u.get("sessionUpdate") == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        """The text of every chunk of `kind`, joined."""
        return "".join(str(u["content"].get("text", "")) for u in self.of(kind) if "content" in u)

    def tool_updates(self, tool_call_id: str) -> list[dict[str, Any]]:
        """Every ``tool_call`` / ``tool_call_update`` of one call, in order."""
        return [
            u
            for _, u in self.updates
            if u.get("toolCallId") == tool_call_id
            and u.get("sessionUpdate") in ("tool_call", "tool_call_update")
        ]

    def clear(self) -> None:
        self.updates.clear()
        self.asks.clear()
        self.fs_writes.clear()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        """Until `predicate()` holds (checked at every update, ask or fs call)."""
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    def _poke(self) -> None:
        self._changed.set()


def _stat(pid: int | str) -> tuple[int, str] | None:
    """(ppid, start time) of a process from ``/proc/<pid>/stat``, None if it is gone."""
    try:
        # The command name (field 2) may hold spaces and parentheses, hence rsplit.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[19]  # ppid (field 4), starttime (field 22)


def descendants(pid: int) -> dict[int, str]:
    """The live descendants of `pid` → their start time, from ``/proc`` (empty without it).

    The start time tells a process from a later one that reused its pid, so a test never kills
    a stranger.
    """
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(entry.name)) is not None:
            children.setdefault(stat[0], []).append((int(entry.name), stat[1]))
    found: dict[int, str] = {}
    stack = [pid]
    while stack:
        for child, started in children.get(stack.pop(), []):
            if child not in found:
                found[child] = started
                stack.append(child)
    return found


@dataclass
class AgentRun:
    """A running agent: the connection, the process, when it was spawned, its stderr log."""

    conn: ClientSideConnection
    process: asyncio.subprocess.Process
    started_at: float
    log_path: Path
    _seen: dict[int, str] = field(default_factory=dict)

    def note_descendants(self) -> None:
        """Remember the agent's current descendants, to kill them at the end (cheap: /proc)."""
        if self.process.returncode is None:
            self._seen.update(descendants(self.process.pid))


@contextlib.asynccontextmanager
async def run_agent(
    client: RecordingClient,
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
) -> AsyncIterator[AgentRun]:
    """Spawn `command` as an ACP agent (see the module docstring); kill everything at the end.

    Args:
        client: the recording client the agent talks to.
        command: the agent's argv (:func:`tests.support.agent_packages.opencode_acp_command`, …).
        env: the agent's whole environment.
        cwd: its working directory (the workspace).
        log_path: where its stderr goes (appended).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        run: AgentRun | None = None
        try:
            async with acp.spawn_agent_process(
                client,
                command[0],
                *command[1:],
                env=dict(env),
                cwd=cwd,
                transport_kwargs={"stderr": log, "shutdown_timeout": 2.0},
            ) as (conn, process):
                run = AgentRun(conn, process, time.monotonic(), log_path)
                watcher = asyncio.create_task(_watch(run))
                try:
                    yield run
                finally:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                    run.note_descendants()
        finally:
            if run is not None:
                _kill_all(run)


async def _watch(run: AgentRun) -> None:
    """Note the agent's descendants every 200 ms, so short-lived shells are known when it dies."""
    while True:
        run.note_descendants()
        await asyncio.sleep(0.2)


def _kill_all(run: AgentRun) -> None:
    if run.process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            run.process.kill()
    for pid, started in run._seen.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
