"""The Desiide workspace tools: the path rule, each tool, its caps, and the failure policy.

Real files under ``tmp_path``, a real ``/bin/sh`` and the real ripgrep (the tests that need it
are skipped, saying so, where no ``rg`` is installed: on PATH or beside this interpreter).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.workspace_tools import (
    READ_CAP,
    TOOL_NAMES,
    TOOL_SPECS,
    OutputTail,
    ToolResult,
    Workspace,
    WorkspaceTools,
)

RG = shutil.which("rg") or shutil.which("rg", path=str(Path(sys.executable).parent))
needs_rg = pytest.mark.skipif(RG is None, reason="ripgrep (rg) is not installed")
BASE_PATH = os.environ.get("PATH", "/usr/bin:/bin")


def env_with_rg() -> dict[str, str]:
    extra = [str(Path(RG).parent)] if RG else []
    return {"PATH": os.pathsep.join([*extra, BASE_PATH])}


def make_tools(root: Path, allowed: list[str] | None = None, **env: str) -> WorkspaceTools:
    return WorkspaceTools(root, {**env_with_rg(), **env}, allowed)


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "outside.txt").write_text("secret outside")
    return workspace


def error_kind(result: ToolResult) -> str:
    assert result.is_error, result
    return result.text.split(":", 1)[0]


# -- the path rule -------------------------------------------------------------------------------

PATH_CASES = [
    ("a.txt", "a.txt"),
    ("./src//a.py", "src/a.py"),
    ("", "."),
    (".", "."),
    ("src/", "src"),
    ("dir with space/ü.txt", "dir with space/ü.txt"),
]


@pytest.mark.parametrize(("raw", "relative"), PATH_CASES, ids=[c[0] or "empty" for c in PATH_CASES])
def test_paths_are_normalized(root: Path, raw: str, relative: str) -> None:
    got, resolved = Workspace(root).resolve(raw)
    assert got == relative
    assert resolved == (root / relative).resolve()


REFUSED_CASES = [
    ("/etc/passwd", "is absolute"),
    ("../outside.txt", "'..' segment"),
    ("a/../../outside.txt", "'..' segment"),
    ("a/../b.txt", "'..' segment"),  # even one that stays inside: one plain rule
    ("a\x00b", "NUL"),
]


@pytest.mark.parametrize(("raw", "said"), REFUSED_CASES, ids=[c[1] for c in REFUSED_CASES])
async def test_escaping_paths_are_refused(root: Path, raw: str, said: str) -> None:
    result = await make_tools(root).call("read_file", {"path": raw})
    assert error_kind(result) == "path_refused"
    assert said in result.text


async def test_links_that_resolve_outside_are_refused(root: Path) -> None:
    outside = root.parent
    (root / "out").symlink_to(outside)
    (root / "out_file").symlink_to(outside / "outside.txt")
    (root / "dangling").symlink_to(outside / "not-there")
    (root / "inside").symlink_to(root)
    write(root, "a.txt", "in")
    tools = make_tools(root)
    for path in ("out/outside.txt", "out_file", "dangling", "out"):
        result = await tools.call("read_file", {"path": path})
        assert error_kind(result) == "path_refused", path
        assert "resolves outside the workspace" in result.text
        assert str(outside) not in result.text  # the target is never named
    assert (await tools.call("read_file", {"path": "inside/a.txt"})).text == "in"


def test_a_root_reached_through_a_link_works(root: Path, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(root)
    write(root, "a.txt", "x")
    relative, resolved = Workspace(tmp_path / "link").resolve("a.txt")
    assert (relative, resolved) == ("a.txt", root.resolve() / "a.txt")


@pytest.mark.parametrize("bad", ["relative/root", "/no/such/dir"])
def test_a_bad_root_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="workspace root"):
        Workspace(bad)


# -- read_file -----------------------------------------------------------------------------------


async def test_read_file_returns_the_text_and_line_ranges(root: Path) -> None:
    write(root, "src/a.py", "one\ntwo\nthree\nfour")
    tools = make_tools(root)
    assert (await tools.call("read_file", {"path": "src/a.py"})) == ToolResult(
        "one\ntwo\nthree\nfour"
    )
    ranged = await tools.call("read_file", {"path": "src/a.py", "startLine": 2, "endLine": 3})
    assert ranged.text == "two\nthree\n"
    assert (await tools.call("read_file", {"path": "src/a.py", "startLine": 4})).text == "four"
    past = await tools.call("read_file", {"path": "src/a.py", "startLine": 9})
    assert past.text == "(nothing from line 9: the file has 4 lines)"
    write(root, "empty.txt", "")
    assert (await tools.call("read_file", {"path": "empty.txt"})).text == "(the file is empty)"


async def test_read_file_cuts_at_256_kib_and_says_where_to_read_on(root: Path) -> None:
    line = "x" * 1023 + "\n"  # 1 KiB a line
    write(root, "big.txt", line * 300)
    tools = make_tools(root)
    result = await tools.call("read_file", {"path": "big.txt"})
    assert len(line * 256) == READ_CAP
    assert result.text == line * 256 + "[cut at 256 KiB; read on with startLine=257]"
    rest = await tools.call("read_file", {"path": "big.txt", "startLine": 257})
    assert rest.text == line * 44 and not rest.is_error


async def test_read_file_cuts_a_giant_line(root: Path) -> None:
    write(root, "min.js", "y" * (READ_CAP * 3))
    result = await make_tools(root).call("read_file", {"path": "min.js"})
    assert result.text == "y" * READ_CAP + "\n[cut at 256 KiB; read on with startLine=1]"


async def test_read_file_at_exactly_the_cap_is_not_cut(root: Path) -> None:
    write(root, "exact.txt", "z" * READ_CAP)
    assert (await make_tools(root).call("read_file", {"path": "exact.txt"})).text == "z" * READ_CAP


READ_ERRORS = [
    ({"path": "nope.txt"}, "not_found"),
    ({"path": "src"}, "not_a_file"),
    ({"path": "bin.dat"}, "not_text"),
    ({}, "invalid_arguments"),
    ({"path": 3}, "invalid_arguments"),
    ({"path": "src/a.py", "startLine": 0}, "invalid_arguments"),
    ({"path": "src/a.py", "startLine": True}, "invalid_arguments"),
    ({"path": "src/a.py", "startLine": 3, "endLine": 2}, "invalid_arguments"),
    ({"path": "src/a.py", "file": "x"}, "invalid_arguments"),
]


@pytest.mark.parametrize(("arguments", "kind"), READ_ERRORS, ids=[str(c[0]) for c in READ_ERRORS])
async def test_read_file_errors(root: Path, arguments: dict[str, Any], kind: str) -> None:
    write(root, "src/a.py", "a\n")
    (root / "bin.dat").write_bytes(b"PK\x00\x01")
    assert error_kind(await make_tools(root).call("read_file", arguments)) == kind


async def test_read_file_refuses_a_fifo(root: Path) -> None:
    os.mkfifo(root / "pipe")
    result = await make_tools(root).call("read_file", {"path": "pipe"})
    assert error_kind(result) == "not_a_file"


async def test_read_file_replaces_bytes_that_are_not_utf8(root: Path) -> None:
    (root / "latin.txt").write_bytes(b"caf\xe9\n")
    assert (await make_tools(root).call("read_file", {"path": "latin.txt"})).text == "caf\ufffd\n"


# -- list_files and search -----------------------------------------------------------------------


@needs_rg
async def test_list_files_of_a_missing_or_escaping_path(root: Path) -> None:
    tools = make_tools(root)
    assert error_kind(await tools.call("list_files", {"path": "nope"})) == "not_found"
    assert error_kind(await tools.call("list_files", {"path": ".."})) == "path_refused"


SEARCH_ERRORS = [
    ({}, "invalid_arguments"),
    ({"query": ""}, "invalid_arguments"),
    ({"query": "x", "regex": "yes"}, "invalid_arguments"),
    ({"query": "x", "path": "/etc"}, "path_refused"),
    ({"query": "x", "pattern": "y"}, "invalid_arguments"),
]


@needs_rg
@pytest.mark.parametrize(
    ("arguments", "kind"), SEARCH_ERRORS, ids=[str(c[0]) for c in SEARCH_ERRORS]
)
async def test_search_errors(root: Path, arguments: dict[str, Any], kind: str) -> None:
    assert error_kind(await make_tools(root).call("search", arguments)) == kind


@pytest.mark.parametrize("tool", ["list_files", "search"])
async def test_without_ripgrep_the_error_says_ripgrep_missing(
    root: Path, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(root / "python3"))  # nothing beside it either
    tools = WorkspaceTools(root, {"PATH": str(root)})  # a PATH without rg
    result = await tools.call(tool, {"query": "x"} if tool == "search" else {})
    assert result.is_error
    assert result.text.startswith("ripgrep_missing: ")


# -- run_command ---------------------------------------------------------------------------------


def test_output_tail_boundaries() -> None:
    tail = OutputTail(4)
    tail.add(b"ab")
    tail.add(b"cd")
    assert (tail.text(), tail.cut, tail.total) == ("abcd", 0, 4)
    tail.add(b"e")
    assert (tail.text(), tail.cut, tail.total) == ("bcde", 1, 5)


RUN_ERRORS = [
    ({}, "invalid_arguments"),
    ({"command": "  "}, "invalid_arguments"),
    ({"command": "true", "timeoutMs": 0}, "invalid_arguments"),
    ({"command": "true", "timeoutMs": 600_001}, "invalid_arguments"),
    ({"command": "true", "timeoutMs": "5"}, "invalid_arguments"),
    ({"command": "true", "cwd": "/"}, "invalid_arguments"),
]


@pytest.mark.parametrize(("arguments", "kind"), RUN_ERRORS, ids=[str(c[0]) for c in RUN_ERRORS])
async def test_run_command_errors(root: Path, arguments: dict[str, Any], kind: str) -> None:
    assert error_kind(await make_tools(root).call("run_command", arguments)) == kind


# -- propose_edit --------------------------------------------------------------------------------

PROPOSAL = {
    "summary": "Rename the helper",
    "files": [
        {"path": "src/a.py", "content": "new a\n"},
        {"path": "./b.py", "content": "new b\n"},
        {"path": "old.py", "content": None},
    ],
}


async def test_propose_edit_without_a_report_is_not_reviewed_and_writes_nothing(
    root: Path,
) -> None:
    write(root, "src/a.py", "old a\n")
    write(root, "old.py", "old\n")
    result = await make_tools(root).call("propose_edit", PROPOSAL)
    assert result == ToolResult(
        "not_reviewed: the editor has not reviewed this proposal; nothing was changed", True
    )
    assert (root / "src/a.py").read_text() == "old a\n"
    assert (root / "old.py").exists() and not (root / "b.py").exists()


async def test_propose_edit_reports_each_file(root: Path) -> None:
    write(root, "src/a.py", "old a\n")
    report = [
        {"path": "src/a.py", "status": "applied"},
        {"path": "b.py", "status": "rejected", "reason": "keep b as it is"},
        {"path": "old.py", "status": "stale"},
    ]
    result = await make_tools(root).call("propose_edit", {**PROPOSAL, "report": report})
    assert result == ToolResult(
        "Proposal 'Rename the helper': 1 of 3 files applied.\n"
        "src/a.py: applied\n"
        "b.py: rejected by the user (reason: keep b as it is)\n"
        "old.py: stale: the file changed since the proposal was made; read it again and "
        "propose anew"
    )
    assert (root / "src/a.py").read_text() == "old a\n"  # the editor writes, never the tool


async def test_propose_edit_with_nothing_applied_is_an_error(root: Path) -> None:
    report = [{"path": "src/a.py", "status": "rejected"}]
    result = await make_tools(root).call("propose_edit", {**PROPOSAL, "report": report})
    assert result.is_error
    assert result.text.splitlines() == [
        "Proposal 'Rename the helper': 0 of 3 files applied.",
        "src/a.py: rejected by the user",
        "b.py: not reported by the editor (treat it as not applied)",
        "old.py: not reported by the editor (treat it as not applied)",
    ]


PROPOSAL_ERRORS = [
    ({"files": [{"path": "a", "content": ""}]}, "invalid_arguments"),
    ({"summary": " ", "files": [{"path": "a", "content": ""}]}, "invalid_arguments"),
    ({"summary": "s", "files": []}, "invalid_arguments"),
    ({"summary": "s", "files": ["a"]}, "invalid_arguments"),
    ({"summary": "s", "files": [{"path": "a"}]}, "invalid_arguments"),
    ({"summary": "s", "files": [{"path": "a", "content": 1}]}, "invalid_arguments"),
    ({"summary": "s", "files": [{"path": "a", "content": "", "mode": 1}]}, "invalid_arguments"),
    ({"summary": "s", "files": [{"path": "../a", "content": ""}]}, "path_refused"),
    ({"summary": "s", "files": [{"path": "/a", "content": ""}]}, "path_refused"),
    ({"summary": "s", "files": [{"path": "src", "content": ""}]}, "invalid_arguments"),
    ({"summary": "s", "files": [{"path": ".", "content": ""}]}, "invalid_arguments"),
    (
        {"summary": "s", "files": [{"path": "a", "content": ""}, {"path": "./a", "content": ""}]},
        "invalid_arguments",
    ),
    ({"summary": "s", "files": [{"path": "a", "content": ""}], "report": "ok"}, "invalid_report"),
    (
        {"summary": "s", "files": [{"path": "a", "content": ""}], "report": [{"path": "a"}]},
        "invalid_report",
    ),
    (
        {
            "summary": "s",
            "files": [{"path": "a", "content": ""}],
            "report": [{"path": "../a", "status": "applied"}],
        },
        "invalid_report",
    ),
    (
        {
            "summary": "s",
            "files": [{"path": "a", "content": ""}],
            "report": [{"path": "a", "status": "applied", "reason": 3}],
        },
        "invalid_report",
    ),
]


@pytest.mark.parametrize(
    ("arguments", "kind"), PROPOSAL_ERRORS, ids=[str(i) for i in range(len(PROPOSAL_ERRORS))]
)
async def test_propose_edit_errors(root: Path, arguments: dict[str, Any], kind: str) -> None:
    (root / "src").mkdir()
    result = await make_tools(root).call("propose_edit", arguments)
    assert error_kind(result) == kind
    assert not (root / "a").exists()


async def test_a_proposal_through_a_link_out_is_refused(root: Path) -> None:
    (root / "out").symlink_to(root.parent)
    arguments = {"summary": "s", "files": [{"path": "out/outside.txt", "content": "x"}]}
    result = await make_tools(root).call("propose_edit", arguments)
    assert error_kind(result) == "path_refused"
    assert (root.parent / "outside.txt").read_text() == "secret outside"


# -- dispatch and the failure policy --------------------------------------------------------------


async def test_a_tool_outside_the_allowed_set_is_refused(root: Path) -> None:
    write(root, "a.txt", "a")
    tools = make_tools(root, allowed=["read_file"])
    assert tools.allowed == frozenset({"read_file"})
    result = await tools.call("run_command", {"command": "touch made"})
    assert result == ToolResult(
        "tool_not_allowed: run_command is not among this task's tools", True
    )
    assert not (root / "made").exists()
    assert (await tools.call("read_file", {"path": "a.txt"})).text == "a"


async def test_an_unknown_tool_is_an_error_result(root: Path) -> None:
    result = await make_tools(root).call("write_file", {})
    assert error_kind(result) == "unknown_tool"
    assert "read_file" in result.text


async def test_a_bug_in_a_tool_is_internal_error_without_detail(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = make_tools(root)

    async def broken(arguments: object) -> ToolResult:
        raise RuntimeError(f"{root} secret detail")

    monkeypatch.setitem(tools._tools, "read_file", broken)
    result = await tools.call("read_file", {"path": "a"})
    assert result == ToolResult(
        "internal_error: read_file failed on the bridge's side; nothing more is known", True
    )


def test_unknown_allowed_names_are_refused(root: Path) -> None:
    with pytest.raises(ValueError, match="unknown workspace tool 'Bash'"):
        WorkspaceTools(root, {}, ["read_file", "Bash"])


def test_every_tool_is_listed_whatever_is_allowed(root: Path) -> None:
    tools = WorkspaceTools(root, {}, [])
    assert [spec.name for spec in tools.specs] == list(TOOL_NAMES)
    assert tools.specs == TOOL_SPECS
    for spec in TOOL_SPECS:
        assert spec.input_schema["type"] == "object"
        assert spec.input_schema["additionalProperties"] is False
    report = TOOL_SPECS[3].input_schema["properties"]["report"]
    assert "never set it yourself" in report["description"]
