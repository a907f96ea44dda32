"""The Desiide workspace tools: the path rule, each tool, its caps, and the failure policy.

Real files under ``tmp_path``, a real ``/bin/sh`` and the real ripgrep (the tests that need it
are skipped, saying so, where no ``rg`` is installed: on PATH or beside this interpreter)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from bridge.agents.workspace_tools import (
    LIST_CAP,
    MATCH_CAP,
    OUTPUT_CAP,
    ToolResult,
    WorkspaceTools,
)
from bridge.agents.workspace_tools import command as command_module
from tests.agents.test_workspace_tools import (
    RG,
    error_kind,
    make_tools,
    needs_rg,
    write,
)
from tests.support.processes import gone


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "outside.txt").write_text("secret outside")
    return workspace


@needs_rg
async def test_list_files_lists_relative_paths_sorted(root: Path) -> None:
    write(root, "b.txt", "b")
    write(root, "src/a.py", "a")
    write(root, "src/deep/c.py", "c")
    write(root, ".hidden", "h")
    tools = make_tools(root)
    assert (await tools.call("list_files", {})).text == "b.txt\nsrc/a.py\nsrc/deep/c.py"
    assert (await tools.call("list_files", {"path": "./src"})).text == "src/a.py\nsrc/deep/c.py"
    globbed = await tools.call("list_files", {"glob": "*.py", "path": "."})
    assert globbed.text == "src/a.py\nsrc/deep/c.py"
    none = await tools.call("list_files", {"glob": "*.rs"})
    assert none == ToolResult("(no files)")


@needs_rg
async def test_list_files_respects_gitignore_and_does_not_follow_links(root: Path) -> None:
    (root / ".git").mkdir()
    write(root, ".gitignore", "build/\n")
    write(root, "build/out.o", "o")
    write(root, "keep.txt", "k")
    (root / "outlink").symlink_to(root.parent)
    assert (await make_tools(root).call("list_files", {})).text == "keep.txt"


@needs_rg
async def test_list_files_caps_at_2000_and_says_how_many_more(root: Path) -> None:
    for index in range(LIST_CAP + 3):
        (root / f"f{index:05d}.txt").write_text("")
    result = await make_tools(root).call("list_files", {})
    lines = result.text.splitlines()
    assert len(lines) == LIST_CAP + 1
    assert lines[0] == "f00000.txt" and lines[LIST_CAP - 1] == f"f{LIST_CAP - 1:05d}.txt"
    assert lines[-1] == "[… and 3 more paths; narrow the path or glob]"


@needs_rg
async def test_search_fixed_string_by_default(root: Path) -> None:
    write(root, "a.py", "x = f(1)\ny = 2\n")
    write(root, "sub/b.py", "z = f(1) + f(2)\n")
    tools = make_tools(root)
    result = await tools.call("search", {"query": "f(1)"})
    assert result == ToolResult("a.py:1:x = f(1)\nsub/b.py:1:z = f(1) + f(2)")
    scoped = await tools.call("search", {"query": "f(", "path": "sub", "glob": "*.py"})
    assert scoped.text == "sub/b.py:1:z = f(1) + f(2)"
    assert (await tools.call("search", {"query": "-e"})).text == "(no matches)"  # never a flag


@needs_rg
async def test_search_regex(root: Path) -> None:
    write(root, "a.txt", "alpha 12\nbeta\ngamma 7\n")
    tools = make_tools(root)
    result = await tools.call("search", {"query": r"\d+$", "regex": True})
    assert result.text == "a.txt:1:alpha 12\na.txt:3:gamma 7"
    bad = await tools.call("search", {"query": "(", "regex": True})
    assert error_kind(bad) == "invalid_query"
    assert "regex parse error" in bad.text


@needs_rg
async def test_search_caps_at_500_matches_and_long_lines(root: Path) -> None:
    write(root, "many.txt", "hit\n" * (MATCH_CAP + 5))
    write(root, "wide.txt", "hit" + "w" * 2000 + "\n")
    result = await make_tools(root).call("search", {"query": "hit"})
    lines = result.text.splitlines()
    assert len(lines) == MATCH_CAP + 1
    assert lines[-1] == "[… and 6 more matches; narrow the path or glob]"
    wide = await make_tools(root).call("search", {"query": "hit", "path": "wide.txt"})
    assert len(wide.text) < 700 and "omitted" in wide.text


@needs_rg
async def test_ripgrep_beside_the_python_is_found(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert RG is not None
    # As in a virtual environment whose bin (holding pip's rg) is not on PATH.
    monkeypatch.setattr(sys, "executable", str(Path(RG).parent / "python3"))
    write(root, "a.txt", "a")
    tools = WorkspaceTools(root, {"PATH": str(root)})  # a PATH without rg
    assert (await tools.call("list_files", {})).text == "a.txt"


@needs_rg
async def test_ripgrep_ignores_its_config_file(root: Path) -> None:
    config = root.parent / "rgrc"
    config.write_text("--hidden\n")
    write(root, ".secret", "s")
    tools = make_tools(root, RIPGREP_CONFIG_PATH=str(config))
    assert (await tools.call("list_files", {})).text == "(no files)"


async def test_run_command_in_the_root_with_exit_code_and_combined_output(root: Path) -> None:
    tools = make_tools(root)
    result = await tools.call("run_command", {"command": "pwd; echo out; echo err >&2"})
    assert result == ToolResult(f"exit code 0\n{root.resolve()}\nout\nerr\n")
    failed = await tools.call("run_command", {"command": "echo no; exit 3"})
    assert failed == ToolResult("exit code 3\nno\n", is_error=True)
    quiet = await tools.call("run_command", {"command": "true"})
    assert quiet == ToolResult("exit code 0\n(no output)")


async def test_run_command_reads_nothing_and_gets_no_vendor_secrets(root: Path) -> None:
    tools = make_tools(root)
    result = await tools.call("run_command", {"command": "cat; echo done"})
    assert result.text == "exit code 0\ndone\n"  # stdin is /dev/null: cat ends at once


async def test_run_command_keeps_the_tail_of_long_output(root: Path) -> None:
    command = "head -c 100000 /dev/zero | tr '\\000' a; echo; echo END"
    result = await make_tools(root).call("run_command", {"command": command})
    head, note, output = result.text.split("\n", 2)
    assert head == "exit code 0"
    total = 100000 + 1 + 4
    assert (
        note
        == f"[the first {total - OUTPUT_CAP} bytes of output are cut; the last {OUTPUT_CAP} follow]"
    )
    assert len(output.encode()) == OUTPUT_CAP and output.endswith("a\nEND\n")


async def test_a_timeout_kills_the_whole_group(root: Path) -> None:
    command = "sleep 30 & echo $! > bg.pid; sleep 30"
    started = time.monotonic()
    result = await make_tools(root).call("run_command", {"command": command, "timeoutMs": 300})
    assert time.monotonic() - started < 5
    assert result.is_error
    assert result.text == "timeout: the command ran longer than 300 ms and was killed\n(no output)"
    assert await gone(int((root / "bg.pid").read_text()))


async def test_a_timeout_kills_what_ignores_sigterm(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command_module, "KILL_GRACE", 0.2)
    command = "trap '' TERM; echo $$ > sh.pid; sleep 30"
    result = await make_tools(root).call("run_command", {"command": command, "timeoutMs": 300})
    assert result.text.startswith("timeout: ")
    assert await gone(int((root / "sh.pid").read_text()))


async def test_background_children_do_not_outlive_a_finished_command(root: Path) -> None:
    command = "sleep 30 > /dev/null 2>&1 & echo $! > bg.pid; echo started"
    result = await make_tools(root).call("run_command", {"command": command})
    assert result == ToolResult("exit code 0\nstarted\n")
    assert await gone(int((root / "bg.pid").read_text()))


async def test_a_background_child_holding_the_pipe_is_cut_off(root: Path) -> None:
    started = time.monotonic()
    command = "(sleep 30; echo late) & echo $! > bg.pid; echo now"
    result = await make_tools(root).call("run_command", {"command": command})
    assert result == ToolResult("exit code 0\nnow\n")
    assert time.monotonic() - started < 5  # DRAIN_AFTER_EXIT, not the child's 30 s
    assert await gone(int((root / "bg.pid").read_text()))


async def test_cancelling_the_call_kills_the_group(root: Path) -> None:
    tools = make_tools(root)
    call = asyncio.ensure_future(
        tools.call("run_command", {"command": "sleep 30 & echo $! > bg.pid; wait"})
    )
    pid_file = root / "bg.pid"
    deadline = time.monotonic() + 5
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await gone(int(pid_file.read_text()))


async def test_run_command_takes_a_whole_float_timeout(root: Path) -> None:
    result = await make_tools(root).call("run_command", {"command": "true", "timeoutMs": 5000.0})
    assert result.text.startswith("exit code 0")
