"""README.md's shell examples run as written after ``make run``, and its doctor example is current.

``make run`` installs the bridge into ``./.venv`` and puts nothing on ``PATH``, so an example a
user copies must call ``.venv/bin/codedeck-bridge``; a bare ``codedeck-bridge`` is "command not
found" on a fresh machine.
"""

from __future__ import annotations

import re
from pathlib import Path

from store.schema import BRIDGE_MIGRATIONS

README = Path(__file__).resolve().parents[2] / "README.md"
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
FENCE = re.compile(r"^(?P<indent> *)```(?P<language>[\w-]*)\s*$")
BARE = re.compile(r"^(?:\$ )?(?:sudo (?:-\S+ )*)?codedeck-bridge(?:\s|$)")


def code_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """Every fenced block: its language, the line number of its first line, its lines."""
    blocks: list[tuple[str, int, list[str]]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, language = len(opening["indent"]), opening["language"]
        start = index + 1
        index = start
        while index < len(lines) and lines[index].strip() != "```":
            index += 1
        blocks.append((language, start + 1, [line[indent:] for line in lines[start:index]]))
        index += 1
    return blocks


def test_the_parser_finds_the_blocks_it_checks() -> None:
    blocks = code_blocks("a\n```sh\nx\n  y\n```\n\n   ```text\n   z\n   ```\n")
    assert blocks == [("sh", 3, ["x", "  y"]), ("text", 8, ["z"])]


def test_shell_examples_call_the_bridge_in_the_venv() -> None:
    shell = [block for block in code_blocks(README.read_text()) if block[0] in SHELL_LANGUAGES]
    assert len(shell) >= 5  # pairing, service (two), sessions, desiide, doctor
    bare = [
        f"README.md:{start + offset}: {line}"
        for _, start, lines in shell
        for offset, line in enumerate(lines)
        if BARE.match(line.strip())
    ]
    assert bare == []
    calls = [line for _, _, lines in shell for line in lines if "codedeck-bridge " in line]
    assert any(".venv/bin/codedeck-bridge doctor" in line for line in calls)


def test_the_doctor_example_shows_the_current_schema() -> None:
    text = README.read_text()
    examples = [
        "\n".join(lines)
        for language, _, lines in code_blocks(text)
        if language == "text" and any(line.startswith("codedeck-bridge doctor") for line in lines)
    ]
    assert len(examples) == 1
    shown = re.findall(r"\(schema v(\d+)\)", examples[0])
    assert shown == [str(BRIDGE_MIGRATIONS[-1].version)]
