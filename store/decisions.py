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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from store.db import BridgeDatabase, Statement
from store.readonly import ReadOnlyDatabase

__all__ = [
    "DECISIONS_TABLE",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "DecisionRecord",
    "call_json",
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
    call: dict[str, Any] | None = None
    """The call judged, ``{"tool", "input"}`` (schema v9; secrets masked), or None."""

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


MAX_CALL_BYTES: Final = 16_384
"""The largest call kept for replay; a bigger one is stored as ``{"tool", "truncated": true}``."""

CALL_SCHEMA_VERSION: Final = 9
"""The schema version that added ``decisions.call``."""
_COLUMNS: Final = "id, at, session_id, tool, outcome, reasons, detail, call"


def _query(
    session_id: str | None,
    limit: int,
    *,
    outcome: str | None = None,
    before_id: int | None = None,
    decision_id: int | None = None,
) -> tuple[str, tuple[Any, ...]]:
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}")
    where: list[str] = []
    params: list[Any] = []
    for clause, value in (
        ("session_id = ?", session_id),
        ("outcome = ?", outcome),
        ("id < ?", before_id),
        ("id = ?", decision_id),
    ):
        if value is not None:
            where.append(clause)
            params.append(value)
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    sql = f"SELECT {_COLUMNS} FROM decisions{condition} ORDER BY id DESC LIMIT ?"
    return sql, (*params, limit)


def _call(raw: object) -> dict[str, Any] | None:
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def call_json(call: Mapping[str, Any] | None, mask: Callable[[str], str]) -> str | None:
    """The stored form of a judged call: JSON through `mask`, at most `MAX_CALL_BYTES`.

    `mask` is the daemon's secret masking (:func:`bridge.redaction.mask`): the log must never
    become a place where a secret the agent handled is kept. A call too big to keep whole keeps
    its tool and says it was cut (replay refuses it).
    """
    if call is None:
        return None
    text = mask(json.dumps(call, separators=(",", ":"), ensure_ascii=False, default=str))
    if len(text.encode()) > MAX_CALL_BYTES:
        return json.dumps({"tool": str(call.get("tool", "")), "truncated": True})
    return text


def _reasons(raw: object) -> tuple[str, ...]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        value = None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return ("?",)


def _record(row: Sequence[Any]) -> DecisionRecord:
    id_, at, session_id, tool, outcome, reasons, detail, call = row
    return DecisionRecord(
        id=int(id_),
        at=str(at),
        session_id=str(session_id),
        tool=str(tool),
        outcome=str(outcome),
        reasons=_reasons(reasons),
        detail=None if detail is None else str(detail),
        call=_call(call),
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
    db: ReadOnlyDatabase,
    session_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
    *,
    outcome: str | None = None,
    before_id: int | None = None,
    decision_id: int | None = None,
) -> list[DecisionRecord]:
    """`list_decisions` over a read-only file; an empty list when it predates the table.

    The filters serve the editor's ``decisions.list`` (``outcome``, and ``before_id`` as the
    paging cursor: rows come newest first) and ``decisions.replay`` (one ``decision_id``). A
    file older than schema v9 has no calls: they read as None.

    Raises:
        ValueError: `limit` out of 1..MAX_LIMIT.
        StoreError: the database failed.
    """
    if not db.has_table(DECISIONS_TABLE):
        return []
    sql, params = _query(
        session_id, limit, outcome=outcome, before_id=before_id, decision_id=decision_id
    )
    if db.schema_version < CALL_SCHEMA_VERSION:
        sql = sql.replace(_COLUMNS, _COLUMNS.replace("call", "NULL"), 1)
    return [_record(row) for row in db.fetchall(sql, params)]


def record_decision_statement(
    *,
    at: str,
    session_id: str,
    tool: str,
    outcome: str,
    reasons: Sequence[str] = (),
    detail: str | None = None,
    call: str | None = None,
) -> Statement:
    """`record_decision` as a statement to run later (in the commit of the decision)."""
    return Statement(
        "INSERT INTO decisions (at, session_id, tool, outcome, reasons, detail, call) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (at, session_id, tool, outcome, json.dumps(list(reasons)), detail, call),
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
