"""``list_files`` and ``search``: ripgrep over the workspace.

Both run ``rg`` (found on the tools' ``PATH`` or beside the Python that runs the host; without it the result is an error whose text starts
with ``ripgrep_missing``, which the orchestrator reads as the task's failure reason) in the
workspace root, with ``--no-config`` (a ``RIPGREP_CONFIG_PATH`` of the environment must not change
what the model sees) and ``--sort path`` (the same workspace lists the same way every time, and the
caps cut at the same place). ripgrep's own defaults stay: ``.gitignore``d and hidden files are
left out, and symbolic links are not followed (so a link cannot list or search outside the root).
Values go in the ``--flag=value`` form and the path after ``--``: nothing the model writes can be
read as another flag.

- ``list_files`` (``rg --files``): one workspace-relative path per line, at most
  :data:`LIST_CAP`; the rest is counted and the result says how many more there are.
- ``search`` (``rg --line-number --with-filename --no-heading``): ``path:line:text`` lines, at most
  :data:`MATCH_CAP`; the query is a fixed string unless ``regex`` is true. A matching line longer
  than :data:`COLUMN_CAP` characters is shown as a preview (``[... omitted end of long line]``).

ripgrep's exit status: 0 found, 1 found nothing, 2 an error. An error with output (a directory it
could not enter) still returns the output; an error without (a bad regex) is the tool's error,
with ripgrep's first message line. A run longer than :data:`RG_TIMEOUT` is killed and returns what
it found, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Final

from bridge.records import record
from bridge.ripgrep import find_ripgrep as locate_ripgrep

from .paths import Workspace
from .results import INVALID_ARGUMENTS, ToolError, ToolResult, bool_arg, check_keys, text_arg

__all__ = [
    "COLUMN_CAP",
    "LIST_CAP",
    "MATCH_CAP",
    "RG_TIMEOUT",
    "RIPGREP_MISSING",
    "find_ripgrep",
    "list_files",
    "search",
]

LIST_CAP: Final = 2000
MATCH_CAP: Final = 500
COLUMN_CAP: Final = 500
RG_TIMEOUT: Final = 60.0
"""Seconds one ripgrep run may take."""
RIPGREP_MISSING: Final = "ripgrep_missing"

_STDERR_KEEP: Final = 2000
_LINE_LIMIT: Final = 1024 * 1024
_BASE: Final = ("--no-config", "--color=never", "--sort=path")


def find_ripgrep(env: Mapping[str, str]) -> str:
    """The ``rg`` executable on `env`'s ``PATH``, else beside the running Python (``pip install
    ripgrep`` puts it there, and a virtual environment's ``bin`` is often not on ``PATH``).

    Raises:
        ToolError: ``ripgrep_missing``.
    """
    found = locate_ripgrep(env.get("PATH") or None)
    if found is None:
        raise ToolError(
            RIPGREP_MISSING,
            "ripgrep (rg) is not installed where the bridge runs, so list_files and search cannot "
            "run; read_file still works for paths you know",
        )
    return found


@record
class _Run:
    lines: list[str]
    more: int
    returncode: int | None
    stderr: str
    timed_out: bool


async def list_files(
    workspace: Workspace, env: Mapping[str, str], arguments: Mapping[str, object]
) -> ToolResult:
    """The ``list_files`` tool.

    Raises:
        ToolError: bad arguments, a refused or missing path, ``ripgrep_missing``.
    """
    check_keys(arguments, ("path", "glob"))
    scope = _scope(workspace, arguments)
    glob = _glob(arguments)
    rg = find_ripgrep(env)
    run = await _ripgrep(workspace, env, [rg, *_BASE, "--files", *glob, *scope], LIST_CAP)
    return _result(run, "(no files)", "more paths", "list_files")


async def search(
    workspace: Workspace, env: Mapping[str, str], arguments: Mapping[str, object]
) -> ToolResult:
    """The ``search`` tool.

    Raises:
        ToolError: bad arguments, a refused or missing path, ``ripgrep_missing``, a bad regex.
    """
    check_keys(arguments, ("query", "path", "glob", "regex"))
    query = text_arg(arguments, "query")
    if not query:
        raise ToolError(INVALID_ARGUMENTS, "'query' is required (the text to look for)")
    fixed = () if bool_arg(arguments, "regex", default=False) else ("--fixed-strings",)
    scope = _scope(workspace, arguments)
    glob = _glob(arguments)
    rg = find_ripgrep(env)
    argv = [
        rg,
        *_BASE,
        "--line-number",
        "--with-filename",
        "--no-heading",
        f"--max-columns={COLUMN_CAP}",
        "--max-columns-preview",
        *fixed,
        *glob,
        f"--regexp={query}",
        *scope,
    ]
    run = await _ripgrep(workspace, env, argv, MATCH_CAP)
    return _result(run, "(no matches)", "more matches", "search")


def _scope(workspace: Workspace, arguments: Mapping[str, object]) -> list[str]:
    """The argv tail naming what to look in (nothing for the root: then paths print bare)."""
    relative, path = workspace.resolve(text_arg(arguments, "path", default=".", path=True) or ".")
    if not path.exists():
        raise ToolError("not_found", f"{relative!r} does not exist")
    return [] if relative == "." else ["--", relative]


def _glob(arguments: Mapping[str, object]) -> list[str]:
    glob = text_arg(arguments, "glob")
    return [f"--glob={glob}"] if glob else []


def _result(run: _Run, empty: str, more_what: str, tool: str) -> ToolResult:
    if run.returncode == 2 and not run.lines:
        said = " ".join(line.strip() for line in run.stderr.splitlines() if line.strip())
        detail = said[:300] or "ripgrep failed"
        kind = "invalid_query" if "regex" in run.stderr else f"{tool}_failed"
        raise ToolError(kind, detail)
    text = "\n".join(run.lines) if run.lines else empty
    if run.more:
        text += f"\n[… and {run.more} {more_what}; narrow the path or glob]"
    if run.timed_out:
        text += f"\n[ripgrep was stopped after {RG_TIMEOUT:.0f} s; the list is incomplete]"
    return ToolResult(text)


async def _ripgrep(workspace: Workspace, env: Mapping[str, str], argv: list[str], cap: int) -> _Run:
    """Run ripgrep, keep its first `cap` lines and count the rest (cancel-safe: killed)."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=workspace.root,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=_LINE_LIMIT,
    )
    assert process.stdout is not None and process.stderr is not None
    lines: list[str] = []
    counted = 0

    async def out(stream: asyncio.StreamReader) -> None:
        nonlocal counted
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line over the limit (rg's own cap keeps them short)
                continue
            if not raw:
                return
            counted += 1
            if len(lines) < cap:
                lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    async def err(stream: asyncio.StreamReader) -> str:
        kept = b""
        while chunk := await stream.read(4096):
            kept = (kept + chunk)[:_STDERR_KEEP]
        return kept.decode("utf-8", "replace")

    timed_out = False
    stderr = ""
    try:
        async with asyncio.timeout(RG_TIMEOUT):
            _, stderr = await asyncio.gather(out(process.stdout), err(process.stderr))
            await process.wait()
    except TimeoutError:
        timed_out = True
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    return _Run(lines, counted - len(lines), process.returncode, stderr, timed_out)
