"""``run_command``'s gate: the command runs only once the host answers for its group.

Each test holds the host inside the window between starting the shell and opening its gate (a
blocking wait in a callback, so the event loop cannot move on) and looks at what the command did
meanwhile. Before the gate existed, the shell ran in that window: a call cancelled there had only
the shell killed and its background ``sleep`` lived on, and a host killed there had written no
record to reap it by. Holding the window open makes both deterministic.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from bridge.agents.workspace_tools import ToolResult, WorkspaceTools, leftovers
from bridge.agents.workspace_tools import command as command_module
from tests.support.processes import gone

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

HOLD = 1.0
"""Seconds the window is held open: ample for an ungated shell to write a file."""
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
BACKGROUND = "sleep 30 & echo $! > bg.pid; wait"


def appears(path: Path, within: float) -> bool:
    """Whether `path` is written within `within` s; blocks the caller (and its event loop)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


async def test_a_call_cancelled_while_the_shell_starts_leaves_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel lands while asyncio still connects the shell's pipes, where asyncio's own
    cleanup kills the shell's pid and not its group: the shell must not have started anything."""
    task: list[asyncio.Future[ToolResult]] = []
    shells: list[int] = []
    started: list[bool] = []

    def connection_made(self: command_module._Command, transport: object) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        shells.append(transport.get_pid())
        started.append(appears(root / "bg.pid", HOLD))
        task[0].cancel()

    monkeypatch.setattr(command_module._Command, "connection_made", connection_made)
    tools = WorkspaceTools(root, ENV)
    task.append(asyncio.ensure_future(tools.call("run_command", {"command": BACKGROUND})))
    with pytest.raises(asyncio.CancelledError):
        await task[0]
    if (root / "bg.pid").exists():  # what the shell started, if it started anything
        assert await gone(int((root / "bg.pid").read_text())), "a background child outlived it"
    assert started == [False], "the command ran before the host answered for its group"
    assert await gone(shells[0])
    assert not (root / "bg.pid").exists()


async def test_the_group_is_recorded_before_the_command_runs(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host ``kill -9``-ed at any moment must leave a record of whatever the command started,
    so the record is written while the shell is still held at its gate."""
    commands = tmp_path / "host" / leftovers.COMMANDS_DIR
    real_record = leftovers.record
    ran_before: list[bool] = []
    record_there: list[bool] = []

    def record(directory: Path | None, pgid: int) -> Path | None:
        ran_before.append(appears(root / "ran.txt", HOLD))
        path = real_record(directory, pgid)
        record_there.append(path is not None and path.exists())
        return path

    monkeypatch.setattr(leftovers, "record", record)
    tools = WorkspaceTools(root, ENV, None, commands)
    result = await tools.call("run_command", {"command": "echo ran > ran.txt; echo done"})
    assert result == ToolResult("exit code 0\ndone\n")
    assert ran_before == [False], "the command ran before its group was recorded"
    assert record_there == [True]
    assert (root / "ran.txt").read_text() == "ran\n"  # it did run, once the gate opened
    assert list(commands.iterdir()) == []  # and its record went with it


async def test_a_command_that_cannot_be_recorded_is_not_run(root: Path, tmp_path: Path) -> None:
    """Fail closed: a command a host's death could leave running unrecorded is refused."""
    blocker = tmp_path / "host"
    blocker.write_text("a file where the host directory should be")
    tools = WorkspaceTools(root, ENV, None, blocker / leftovers.COMMANDS_DIR)
    command = "echo $$ > sh.pid; echo ran > ran.txt"
    result = await tools.call("run_command", {"command": command})
    assert result.is_error
    assert result.text.startswith("command_failed: not run: the command could not be recorded")
    assert not (root / "ran.txt").exists()
    assert not (root / "sh.pid").exists()


async def test_the_gated_shell_is_the_group_leader_with_a_plain_stdin(root: Path) -> None:
    """The gate becomes the command's shell in place: ``$$`` is the recorded group, ``$0`` and
    the arguments are those of ``sh -c command``, stdin is ``/dev/null``, not the gate pipe."""
    command = 'echo "$$ $(cut -d" " -f5 /proc/$$/stat) $0 $#"; readlink /proc/$$/fd/0'
    result = await WorkspaceTools(root, ENV).call("run_command", {"command": command})
    first, stdin = result.text.splitlines()[1:3]
    pid, pgid, zero, count = first.split()
    assert (pid, zero, count) == (pgid, command_module.SHELL, "0")
    assert stdin == "/dev/null"
