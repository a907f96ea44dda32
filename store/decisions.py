"""The permission gate's audit log: the ``decisions`` table (schema v3).

Every decision the gate takes — an auto-allow, a card sent to the phone, the phone's answer, a
block — is one appended row: when (`at`, ISO 8601 UTC), which session, which tool, the outcome,
and the reason labels that drove it (a JSON list such as ``["rm_rf"]``). Rows are never updated.

Two readers share one query: `list_decisions` for the daemon (over `BridgeDatabase`) and
`read_decisions` for ``codedeck-bridge decisions``, which reads the file directly through
`store.readonly` so that the log can be inspected with the daemon stopped (and, thanks to WAL,
while it runs, without going through it). Both return the newest rows first.

Rows written by a future gate are read tolerantly: a `reasons` value that is not a JSON list of
strings comes back as ``("?",)`` rather than failing the whole listing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from store.db import BridgeDatabase, Statement
from store.readonly import ReadOnlyDatabase

__all__ = [
    "DECISIONS_TABLE",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "DecisionRecord",
    "list_decisions",
    "read_decisions",
    "record_decision",
    "record_decision_statement",
]

DECISIONS_TABLE: Final = "decisions"
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 10_000


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One row of the audit log."""

    id: int
    at: str
    session_id: str
    tool: str
    outcome: str
    reasons: tuple[str, ...]
    detail: str | None

    def as_json(self) -> dict[str, Any]:
        """The row as the CLI's ``--json`` prints it (camelCase, like the control API)."""
        return {
            "id": self.id,
            "at": self.at,
            "sessionId": self.session_id,
            "tool": self.tool,
            "outcome": self.outcome,
            "reasons": list(self.reasons),
            "detail": self.detail,
        }


def _query(session_id: str | None, limit: int) -> tuple[str, tuple[Any, ...]]:
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}")
    columns = "id, at, session_id, tool, outcome, reasons, detail"
    if session_id is None:
        return f"SELECT {columns} FROM decisions ORDER BY id DESC LIMIT ?", (limit,)
    return (
        f"SELECT {columns} FROM decisions WHERE session_id = ? ORDER BY id DESC LIMIT ?",
        (session_id, limit),
    )


def _reasons(raw: object) -> tuple[str, ...]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        value = None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return ("?",)


def _record(row: Sequence[Any]) -> DecisionRecord:
    id_, at, session_id, tool, outcome, reasons, detail = row
    return DecisionRecord(
        id=int(id_),
        at=str(at),
        session_id=str(session_id),
        tool=str(tool),
        outcome=str(outcome),
        reasons=_reasons(reasons),
        detail=None if detail is None else str(detail),
    )


async def list_decisions(
    db: BridgeDatabase, session_id: str | None = None, limit: int = DEFAULT_LIMIT
) -> list[DecisionRecord]:
    """The newest `limit` decisions, newest first, optionally of one session.

    Raises:
        ValueError: `limit` out of 1..MAX_LIMIT.
        StoreError: the database failed.
    """
    sql, params = _query(session_id, limit)
    return [_record(row) for row in await db.fetchall(sql, params)]


def read_decisions(
    db: ReadOnlyDatabase, session_id: str | None = None, limit: int = DEFAULT_LIMIT
) -> list[DecisionRecord]:
    """`list_decisions` over a read-only file; an empty list when it predates the table.

    Raises:
        ValueError: `limit` out of 1..MAX_LIMIT.
        StoreError: the database failed.
    """
    if not db.has_table(DECISIONS_TABLE):
        return []
    sql, params = _query(session_id, limit)
    return [_record(row) for row in db.fetchall(sql, params)]


def record_decision_statement(
    *,
    at: str,
    session_id: str,
    tool: str,
    outcome: str,
    reasons: Sequence[str] = (),
    detail: str | None = None,
) -> Statement:
    """`record_decision` as a statement to run later (in the commit of the decision)."""
    return Statement(
        "INSERT INTO decisions (at, session_id, tool, outcome, reasons, detail) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (at, session_id, tool, outcome, json.dumps(list(reasons)), detail),
    )


async def record_decision(
    db: BridgeDatabase,
    *,
    at: str,
    session_id: str,
    tool: str,
    outcome: str,
    reasons: Sequence[str] = (),
    detail: str | None = None,
) -> int:
    """Append one decision; returns its id. Joins the caller's transaction if one is open.

    Raises:
        StoreError: the database failed.
    """
    # In a transaction (a savepoint inside the caller's), so that no other task's insert can
    # come between ours and last_insert_rowid() on the shared connection.
    statement = record_decision_statement(
        at=at,
        session_id=session_id,
        tool=tool,
        outcome=outcome,
        reasons=reasons,
        detail=detail,
    )
    async with db.transaction():
        await db.execute(*statement)
        row = await db.fetchone("SELECT last_insert_rowid()")
    assert row is not None
    return int(row[0])
