"""Reading Claude Code's transcripts: input uuids, received inputs, the cumulative cost."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from bridge.agents.claude import input_uuid, last_total_cost, received_uuids, transcript_paths

SESSION = "0f8e2b4c-1111-4222-8333-444455556666"


def _write(config: Path, slug: str, session: str, lines: list[object | str]) -> Path:
    path = config / "projects" / slug / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    return path


def test_input_uuid() -> None:
    u = str(uuid.uuid4())
    assert input_uuid(u) == u
    assert input_uuid(u.upper()) == u
    mapped = input_uuid("inbox-row-17")
    assert uuid.UUID(mapped) and mapped == input_uuid("inbox-row-17") != input_uuid("inbox-row-18")


def test_transcripts_are_found_under_any_project(tmp_path: Path) -> None:
    first = _write(tmp_path, "-w-app", SESSION, [])
    assert transcript_paths(tmp_path, [SESSION]) == [first]
    assert transcript_paths(tmp_path, ["../../etc/passwd", "*"]) == []
    assert transcript_paths(tmp_path / "nothing-here", [SESSION]) == []


def test_received_uuids_reads_user_lines_only(tmp_path: Path) -> None:
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    path = _write(
        tmp_path,
        "-w",
        SESSION,
        [
            {"type": "queue-operation", "operation": "enqueue", "content": "x"},
            {"type": "user", "uuid": a, "message": {"role": "user", "content": "hi"}},
            {"type": "assistant", "uuid": b, "message": {}},
            "{not json",
            {"type": "user", "uuid": 5},
            '{"type": "user", "uuid": "' + b + '", "message"',  # torn last line
        ],
    )
    assert received_uuids([path]) == {a}
    assert received_uuids([tmp_path / "missing.jsonl"]) == set()


def test_last_total_cost(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "-w",
        SESSION,
        [
            {"type": "cost-state", "totalCostUSD": 0.1},
            {"type": "user", "uuid": "u"},
            {"type": "cost-state", "totalCostUSD": 0.25},
            {"type": "cost-state", "totalCostUSD": "bad"},
        ],
    )
    assert last_total_cost([path]) == 0.25
    assert last_total_cost([]) is None


def test_an_input_absorbed_into_a_running_turn_counts_as_received(tmp_path: Path) -> None:
    """Lines as Claude Code 2.1.332 writes them when a queued input joins a running turn: no
    user line with its uuid, only the queue's removal and the attachment (a real-CLI chaos run
    found it: the input was sent again, and ran twice)."""
    absorbed, by_attachment, waiting = (str(uuid.uuid4()) for _ in range(3))
    path = _write(
        tmp_path,
        "-w",
        SESSION,
        [
            {"type": "queue-operation", "operation": "enqueue", "content": "b"},
            {
                "type": "queue-operation",
                "operation": "remove",
                "reason": "absorbed_mid_turn",
                "commandUuid": absorbed,
            },
            {"type": "queue-operation", "operation": "remove", "commandUuid": waiting},
            {
                "uuid": str(uuid.uuid4()),
                "attachment": {"type": "queued_command", "source_uuid": by_attachment},
            },
        ],
    )
    assert received_uuids([path]) == {absorbed, by_attachment}  # a plain removal is not taken
