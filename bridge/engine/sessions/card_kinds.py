"""The kinds of card a session shows, what each holds, and the lines a phone draws for it.

A card is a question the phone (or, for a review, the editor) has to answer before the agent
goes on. Which call gets which card, and what each answer means, are the rules of
:class:`~bridge.engine.sessions.broker.SessionCards`; this module is the shape of the cards
themselves: one function per kind writes its transcript lines, and each line's
``metadata.special`` names the card to the phone:

==============  ====================================  =======================================
kind            lines (``special``)                   answered by
==============  ====================================  =======================================
``question``    ``ask_question``, one per question    a key, ``question-input`` or ``input``
``plan``        ``plan`` (if any), ``plan_approval``  a key: 1 or 2 approve, 3 revises
``permission``  ``permission_request``                ``permission-res``, the editor's answer
``review``      ``edit_review``                       the editor's ``edits.report``
==============  ====================================  =======================================

Pure: the timestamp comes in as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bridge.protocol import OutputEntry

__all__ = [
    "Card",
    "CardKind",
    "permission_line",
    "plan_lines",
    "question_lines",
    "question_options",
    "review_line",
]

CardKind = Literal["permission", "plan", "question", "review"]
"""The kinds of card (the table above)."""


@dataclass(slots=True)
class Card:
    """A question the phone has to answer before the agent goes on."""

    session_id: str
    request_id: str
    kind: CardKind
    tool_name: str
    tool_input: dict[str, Any]
    created_at: float
    questions: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[int, str] = field(default_factory=dict)
    """Answers by question index (two questions may share a text)."""
    reasons: tuple[str, ...] = ()
    """The gate's reason labels (a permission or review card)."""


def question_lines(
    request_id: str, questions: Sequence[Mapping[str, Any]], ts: str
) -> list[OutputEntry]:
    """A question card: one ``ask_question`` line per question, with its options."""
    lines: list[OutputEntry] = []
    for index, question in enumerate(questions):
        metadata: dict[str, Any] = {
            "special": "ask_question",
            "tool_use_id": request_id,
            "options": question_options(question),
            "question_index": index,
            "question_count": len(questions),
        }
        if question.get("header"):
            metadata["header"] = str(question["header"])
        if question.get("multiSelect"):
            metadata["multiSelect"] = True
        lines.append(
            OutputEntry(
                entryType="system",
                content=str(question.get("question", "")),
                timestamp=ts,
                metadata=metadata,
            )
        )
    return lines


def plan_lines(request_id: str, plan: str, ts: str) -> list[OutputEntry]:
    """A plan card: the plan as the assistant's text (when there is one), then the approval."""
    lines: list[OutputEntry] = []
    if plan:
        lines.append(
            OutputEntry(
                entryType="text",
                content=plan,
                timestamp=ts,
                metadata={"role": "assistant", "special": "plan", "tool_use_id": request_id},
            )
        )
    lines.append(
        OutputEntry(
            entryType="system",
            content="Plan approval needed",
            timestamp=ts,
            metadata={
                "special": "plan_approval",
                "tool_use_id": request_id,
                "has_plan": bool(plan),
            },
        )
    )
    return lines


def permission_line(
    card: Card, reason_text: str | None, description: str | None, agent_id: str | None, ts: str
) -> OutputEntry:
    """A permission card: the call, the gate's labels and why (`reason_text`), the agent's own
    words for the call (`description`, also the line's text) and the subagent that made it."""
    metadata: dict[str, Any] = {
        "special": "permission_request",
        "tool_name": card.tool_name,
        "tool_use_id": card.request_id,
        "tool_input": card.tool_input,
        "reasons": list(card.reasons),
    }
    if reason_text is not None:
        metadata["reason_text"] = reason_text
    if description:
        metadata["description"] = description
    if agent_id:
        metadata["subagent"] = True
        metadata["agent_id"] = agent_id
    return OutputEntry(
        entryType="system",
        content=description or f"Permission needed: {card.tool_name}",
        timestamp=ts,
        metadata=metadata,
    )


def review_line(card: Card, count: int, ts: str) -> OutputEntry:
    """A review card: the proposal's size and summary (the editor shows the edits)."""
    text = f"Edit proposed ({count} file{'s' if count != 1 else ''}): review it in the editor"
    summary = card.tool_input.get("summary")
    if isinstance(summary, str) and summary.strip():
        text = f"{text}. {summary.strip()[:500]}"
    metadata: dict[str, Any] = {
        "special": "edit_review",
        "tool_name": card.tool_name,
        "tool_use_id": card.request_id,
        "reasons": list(card.reasons),
    }
    return OutputEntry(entryType="system", content=text, timestamp=ts, metadata=metadata)


def question_options(question: Mapping[str, Any]) -> list[dict[str, str]]:
    raw = question.get("options")
    out: list[dict[str, str]] = []
    for option in raw if isinstance(raw, list) else []:
        if isinstance(option, dict) and option.get("label") is not None:
            item = {"label": str(option["label"])}
            if option.get("description"):
                item["description"] = str(option["description"])
            out.append(item)
        elif isinstance(option, str):
            out.append({"label": option})
    return out
