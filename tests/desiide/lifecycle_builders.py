"""Builders for the task-lifecycle tests (test_lifecycle, test_lifecycle_session).

Builders make the daemon's reports (v10 transcript entries as the Claude adapter writes them,
and card views as ``tasks.watch`` gives them); :class:`Feed` numbers a task's entries like the
session's transcript does. Time is a number the tests move by hand.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, assert_never

from bridge.desiide.budgets import Budget
from bridge.desiide.lifecycle.machine import TaskBook
from bridge.desiide.lifecycle.types import (
    Action,
    AnswerCard,
    CardView,
    Emit,
    Judge,
    Log,
    RunChecks,
    SendInput,
    StartSession,
    StopSession,
    Success,
    TaskState,
)

T0 = 1_900_000_000.0
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
PYTEST = ["python", "-m", "pytest", "-q"]

# --- builders --------------------------------------------------------------------------------


def entry(entry_type: str, content: str = "", **metadata: Any) -> dict[str, Any]:
    return {
        "entryType": entry_type,
        "content": content,
        "timestamp": "2030-03-17T17:46:40.000Z",
        "metadata": metadata,
    }


def text(content: str, model: str = "claude-test-1") -> dict[str, Any]:
    return entry("text", content, role="assistant", model=model)


def tool_use(tool_id: str, tool: str, **args: Any) -> dict[str, Any]:
    return entry(
        "tool_use",
        f"{tool}(…)",
        role="assistant",
        tool_name=f"mcp__desiide__{tool}",
        tool_use_id=tool_id,
        tool_input=args,
    )


def tool_result(tool_id: str, content: str, is_error: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"tool_use_id": tool_id}
    if is_error:
        metadata["is_error"] = True
    return entry("tool_result", content, **metadata)


def result(tokens_in: int = 100, tokens_out: int = 20, cost: float = 0.01) -> dict[str, Any]:
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out, "cache_read_input_tokens": 7}
    return entry(
        "system",
        "Session complete — 1 turn, $0.0100",
        subtype="result",
        num_turns=1,
        cost_usd=cost,
        usage=usage,
        model_usage={"claude-test-1": {"contextWindow": 200_000}},
    )


def call_usage(tokens_in: int, tokens_out: int) -> dict[str, Any]:
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    return entry("system", f"Tokens: {tokens_in} in / {tokens_out} out", usage=usage)


def stream_end() -> dict[str, Any]:
    return entry("system", "", stream_end=True)


def permission(card_id: str, tool: str, reasons: Sequence[str] = (), **args: Any) -> CardView:
    return CardView(card_id, "permission", f"mcp__desiide__{tool}", args, tuple(reasons))


def review(card_id: str, files: dict[str, str | None], summary: str = "Fix it") -> CardView:
    args = {"summary": summary, "files": [{"path": p, "content": c} for p, c in files.items()]}
    return CardView(card_id, "review", "mcp__desiide__propose_edit", args)


class Feed:
    """One task's session: numbers entries from 0 like the transcript, keeps the cards shown."""

    def __init__(self, book: TaskBook, task_id: str) -> None:
        self.book, self.task_id, self.seq = book, task_id, 0
        self.cards: list[CardView] = []

    def __call__(
        self,
        *entries: dict[str, Any],
        cards: Sequence[CardView] | None = None,
        alive: bool = True,
        now: float = T0,
    ) -> list[Action]:
        numbered = []
        for item in entries:
            numbered.append((self.seq, item))
            self.seq += 1
        if cards is not None:
            self.cards = list(cards)
        return self.book.on_session(self.task_id, numbered, self.cards, alive, now)


def events(actions: Sequence[Action]) -> list[dict[str, Any]]:
    return [a.event for a in actions if isinstance(a, Emit)]


def kinds(actions: Sequence[Action]) -> list[str]:
    """A compact view: event types (``state_changed`` as ``→<to>``) and other action names."""
    out = []
    for action in actions:
        if isinstance(action, Emit):
            event = action.event
            out.append(f"→{event['to']}" if event["type"] == "state_changed" else event["type"])
        else:
            out.append(type(action).__name__)
    return out


def describe(action: Action) -> str:
    """A dispatcher over the closed union, as the runtime's is (mypy proves it exhaustive)."""
    match action:
        case Emit(task_id=task_id, event=event):
            return f"emit {task_id} {event['type']}"
        case StartSession(task_id=task_id):
            return f"start {task_id}"
        case AnswerCard(task_id=task_id, card_id=card_id, allow=allow):
            return f"answer {task_id} {card_id} {allow}"
        case SendInput(task_id=task_id):
            return f"input {task_id}"
        case StopSession(task_id=task_id):
            return f"stop {task_id}"
        case RunChecks(task_id=task_id):
            return f"checks {task_id}"
        case Log(level=level, message=message):
            return f"log {level} {message}"
        case Judge(task_id=task_id, card_id=card_id):
            return f"judge {task_id} {card_id}"
        case _:
            assert_never(action)


def started(
    kind: str = "edit",
    *,
    tools: Sequence[str] | None = None,
    budget: Budget | None = None,
    success: Success | None = None,
    checks: Sequence[Sequence[str]] | None = None,
) -> tuple[TaskBook, Feed]:
    """A book with one task ``t1``, started and running (its first entry read)."""
    book = TaskBook()
    book.create("t1", kind, "Do the thing", tools, success, budget, T0, check_commands=checks)
    feed = Feed(book, "t1")
    feed(text("On it."))
    assert book.state("t1") is TaskState.RUNNING
    return book, feed


# Error entries as the Claude adapter writes them, one per ModelErrorKind: (kind, entry, retryable).
MODEL_ERRORS = [
    ("auth", entry("error", "Authentication failed: bad key", special="auth_error"), False),
    ("rate_limit", entry("error", "API Error: 429 rate_limit_error", error_type="unknown"), True),
    ("overloaded", entry("error", 'API Error: 529 {"type":"overloaded_error"}'), True),
    ("network", entry("error", "API Error: Connection error."), True),
    ("timeout", entry("error", "API Error: Request timed out."), True),
    ("not_found", entry("error", "API Error: 404 model: claude-nope not_found_error"), False),
    ("bad_request", entry("error", "API Error: 400 prompt is too long"), False),
    ("server", entry("error", "API Error: 500 Internal server error"), True),
    (
        "unknown",
        entry("error", "error_during_execution", error_type="error_during_execution"),
        False,
    ),
]
