"""DESIIDE.md documents exactly what the code has (the seed: "a test fails if a method or event is
missing here").

Every list is derived from the code — the method tables, the event union, the enums, the error
names — so adding a method, an event type, a state, a failure reason or an error code without
documenting it fails here, and so does documenting one the code does not have.
"""

from __future__ import annotations

import re
from pathlib import Path

from bridge.desiide.errors import ERROR_NAMES
from bridge.desiide.models.errors import is_retryable
from bridge.desiide.schema.methods import (
    METHODS,
    MODEL_ERROR_PREFIX,
    NOTIFICATION_METHODS,
    REVERSE_METHODS,
    TASK_EVENT_TYPES,
    TASK_REASON_LABELS,
    FailureReason,
    KnownPack,
    ModelErrorKind,
    TaskKind,
    TaskState,
    ToolName,
)
from bridge.gate.labels import DENY_RULES, FLOOR_LABELS, LOOP_LABEL

DOC = (Path(__file__).resolve().parents[2] / "DESIIDE.md").read_text(encoding="utf-8")


def section(heading: str) -> str:
    """The text under the heading whose title contains ``heading``, up to the next heading of
    the same or a higher level."""
    match = re.search(rf"^(#+) [^\n]*{re.escape(heading)}[^\n]*$", DOC, flags=re.MULTILINE)
    assert match, f"DESIIDE.md has no heading containing {heading!r}"
    level = len(match.group(1))
    rest = DOC[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def headings(text: str, level: int) -> list[str]:
    return re.findall(rf"^{'#' * level} (\S+)\s*$", text, flags=re.MULTILINE)


def first_column(text: str) -> list[str]:
    """The backticked literal that starts each table row of ``text``."""
    return re.findall(r"^\|\s*`([^`]+)`", text, flags=re.MULTILINE)


def test_every_request_has_its_heading_and_nothing_else() -> None:
    found = headings(section("Requests (extension → orchestrator)"), 3)
    assert sorted(found) == sorted(METHODS)
    assert len(found) == len(set(found))


def method_text(method: str) -> str:
    """The text under ``### <method>``."""
    match = re.search(rf"^### {re.escape(method)}\s*$", DOC, flags=re.MULTILINE)
    assert match, method
    rest = DOC[match.end() :]
    end = re.search(r"^#{1,3} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def test_every_method_states_its_params_and_result() -> None:
    for method in [*METHODS, *REVERSE_METHODS]:
        text = method_text(method)
        assert "- params:" in text and "- result:" in text, method


def test_the_reverse_requests() -> None:
    assert headings(section("Reverse requests"), 3) == list(REVERSE_METHODS)


def test_every_notification() -> None:
    assert headings(section("Notifications (orchestrator → extension)"), 3) == list(
        NOTIFICATION_METHODS
    )


def test_every_task_event_type_and_nothing_else() -> None:
    assert headings(section("task.event"), 4) == list(TASK_EVENT_TYPES)


def test_every_task_state() -> None:
    table = first_column(section("Task states and lifecycle"))
    assert [state for state in table if state in set(TaskState)] == [s.value for s in TaskState]
    diagram = re.search(r"^`queued →.*`$", section("Task states and lifecycle"), flags=re.MULTILINE)
    assert diagram, "the lifecycle line is missing"
    for state in TaskState:
        assert state.value in diagram.group(0), f"{state} missing from the lifecycle line"


def test_every_failure_reason_and_nothing_else() -> None:
    table = first_column(section("Failure reasons"))
    expected = [reason.value for reason in FailureReason] + [f"{MODEL_ERROR_PREFIX}<kind>"]
    assert sorted(table) == sorted(expected)


def test_every_model_error_kind_and_nothing_else() -> None:
    assert first_column(section("ModelErrorKind")) == [kind.value for kind in ModelErrorKind]


def test_the_retryable_column_is_the_codes() -> None:
    rows = re.findall(
        r"^\|\s*`(\w+)`.*\|\s*(yes|no)\s*\|$", section("ModelErrorKind"), re.MULTILINE
    )
    assert {kind: flag == "yes" for kind, flag in rows} == {
        kind.value: is_retryable(kind) for kind in ModelErrorKind
    }


def test_every_error_code_with_its_name_and_nothing_else() -> None:
    rows = re.findall(
        r"^\|\s*`(-\d+)`\s*\|\s*(\w+)\s*\|", section("Error codes"), flags=re.MULTILINE
    )
    assert {int(code): name for code, name in rows} == dict(ERROR_NAMES)
    assert len(rows) == len(ERROR_NAMES)


def test_every_tool_and_nothing_else() -> None:
    assert sorted(first_column(section("Tools"))) == sorted(tool.value for tool in ToolName)


def test_every_pack_and_nothing_else() -> None:
    assert first_column(section("JEV packs")) == [pack.value for pack in KnownPack]


def test_the_vocabularies_are_named() -> None:
    gate_labels = [*DENY_RULES, *FLOOR_LABELS, LOOP_LABEL]
    for value in [*TASK_REASON_LABELS, *gate_labels, *(kind.value for kind in TaskKind)]:
        assert f"`{value}`" in DOC, value
