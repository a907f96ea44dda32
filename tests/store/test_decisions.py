"""The audit log: the judged call kept for replay (schema v9), filters and paging."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from store import BridgeDatabase
from store.decisions import (
    MAX_CALL_BYTES,
    call_json,
    read_decisions,
    record_decision_statement,
)
from store.migrations import migrate
from store.readonly import open_readonly
from store.schema import BRIDGE_MIGRATIONS


def _upper(text: str) -> str:
    return text.replace("secret", "[MASKED]")


def test_call_json_masks_and_caps() -> None:
    assert call_json(None, _upper) is None
    text = call_json({"tool": "Bash", "input": {"command": "echo secret"}}, _upper)
    assert text is not None and json.loads(text) == {
        "tool": "Bash",
        "input": {"command": "echo [MASKED]"},
    }
    huge = call_json({"tool": "Write", "input": {"content": "x" * MAX_CALL_BYTES}}, _upper)
    assert huge is not None and json.loads(huge) == {"tool": "Write", "truncated": True}


async def _add(db: BridgeDatabase, session: str, outcome: str, call: str | None) -> None:
    async with db.transaction():
        await db.execute(
            *record_decision_statement(
                at="2026-12-03T00:00:00.000Z",
                session_id=session,
                tool="mcp__desiide__run_command",
                outcome=outcome,
                reasons=("privileged",),
                call=call,
            )
        )


async def test_filters_paging_and_the_call(db: BridgeDatabase, home: Path) -> None:
    call = json.dumps({"tool": "mcp__desiide__run_command", "input": {"command": "sudo ls"}})
    for n in range(5):
        await _add(db, "task-a" if n % 2 == 0 else "task-b", "card" if n < 3 else "allow", call)
    await _add(db, "task-a", "block", None)
    with open_readonly(home) as ro:
        newest = read_decisions(ro, limit=2)
        assert [d.id for d in newest] == [6, 5]
        assert newest[0].call is None
        assert newest[1].call == {
            "tool": "mcp__desiide__run_command",
            "input": {"command": "sudo ls"},
        }
        page = read_decisions(ro, limit=2, before_id=newest[-1].id)
        assert [d.id for d in page] == [4, 3]
        assert [d.id for d in read_decisions(ro, "task-a", 50, outcome="card")] == [3, 1]
        assert [d.id for d in read_decisions(ro, decision_id=2)] == [2]


def test_a_file_before_v9_reads_without_calls(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    path = home / "bridge.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, BRIDGE_MIGRATIONS[:8], path=path)
    conn.execute(
        "INSERT INTO decisions (at, session_id, tool, outcome, reasons) "
        "VALUES ('2026-01-01T00:00:00.000Z', 's', 'Bash', 'card', '[]')"
    )
    conn.close()
    path.chmod(0o600)
    with open_readonly(home) as ro:
        (row,) = read_decisions(ro)
        assert row.call is None and row.outcome == "card"
