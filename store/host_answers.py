"""Answers to permission asks parked in session hosts, until each host confirmed it has them.

The engine commits an answer (``SaveAnswer``) in the same transaction as the decision that made
it. The runtime then hands it to the session's host; when the host replies ``answer_done`` the
row is deleted. A daemon that dies in between finds the row at its next start and sends the
answer again, before the host re-presents the ask: the phone is never asked twice, and the tool
call runs once. The answer is JSON ``{allow, message, always, updated_input}``; it holds what the
phone answered (an ``AskUserQuestion``'s answers among them), never a secret.
"""

from __future__ import annotations

import json
from typing import Any

from store.db import BridgeDatabase, Statement

__all__ = ["delete_answer", "load_answers", "save_answer", "save_answer_statement"]


def save_answer_statement(
    session_id: str, request_id: str, answer: dict[str, Any], now: int
) -> Statement:
    """`save_answer` as a statement to run later (in the commit of the decision)."""
    return Statement(
        "INSERT INTO host_answers (session_id, request_id, answer, created_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, request_id) "
        "DO UPDATE SET answer = excluded.answer",
        (session_id, request_id, json.dumps(answer, separators=(",", ":")), now),
    )


async def save_answer(
    db: BridgeDatabase, session_id: str, request_id: str, answer: dict[str, Any], now: int
) -> None:
    """Keep `answer` (a later answer to the same ask replaces it)."""
    await db.execute(*save_answer_statement(session_id, request_id, answer, now))


async def load_answers(db: BridgeDatabase, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    """``(request_id, answer)`` of a session, oldest first (a damaged row is skipped)."""
    rows = await db.fetchall(
        "SELECT request_id, answer FROM host_answers WHERE session_id = ? ORDER BY created_at",
        (session_id,),
    )
    out: list[tuple[str, dict[str, Any]]] = []
    for request_id, text in rows:
        try:
            answer = json.loads(text)
        except ValueError:
            continue
        if isinstance(answer, dict):
            out.append((str(request_id), answer))
    return out


async def delete_answer(db: BridgeDatabase, session_id: str, request_id: str) -> None:
    """The host has the answer (or no longer needs it)."""
    await db.execute(
        "DELETE FROM host_answers WHERE session_id = ? AND request_id = ?",
        (session_id, request_id),
    )
