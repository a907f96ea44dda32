"""bridge.protocol is pure: no I/O, no clock, no randomness, nothing else of the project."""

from __future__ import annotations

import ast
from pathlib import Path

import bridge.protocol

PACKAGE = Path(bridge.protocol.__file__).parent
FORBIDDEN = {
    "asyncio",
    "websockets",
    "aiosqlite",
    "socket",
    "time",
    "random",
    "secrets",
    "logging",
    "os",
    "subprocess",
    "threading",
    "datetime",
    "sqlite3",
    "uuid",
}


def imported_modules(path: Path) -> set[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[tuple[str, int]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(alias.name, 0) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add((node.module or "", node.level))
    return found


def test_protocol_modules_import_no_io_and_nothing_else_of_the_project() -> None:
    paths = sorted(PACKAGE.glob("*.py"))
    assert len(paths) >= 10
    for path in paths:
        for module, level in imported_modules(path):
            top = module.split(".")[0]
            assert top not in FORBIDDEN, f"{path.name} imports {module}"
            if level == 0:
                assert top not in {"bridge", "relaypolicy", "store", "tests"}, (
                    f"{path.name}: {module}"
                )
            else:
                assert level == 1, f"{path.name} reaches outside the package: {module}"
