"""The scripted agent's durable record: fsync'd JSONL, torn tails, the stable SDK session id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.agents.scripted_log import (
    InputLog,
    count_executions,
    inputs_path,
    load_or_create_sdk_session_id,
    read_logged_uids,
    validate_session_id,
)
from bridge.host.driver import DriverError

AT = "2023-11-14T22:13:20.000Z"


def record(uid: str, text: str = "hi") -> bytes:
    return json.dumps({"uid": uid, "text": text, "at": AT}).encode() + b"\n"


def test_append_writes_one_json_line_per_input(tmp_path: Path) -> None:
    log = InputLog(tmp_path / "s.inputs.jsonl")
    log.append("u1", "hello", AT)
    log.append("u2", "wörld \ud800", AT)  # a lone surrogate must not break logging
    log.close()
    lines = (tmp_path / "s.inputs.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line) for line in lines[:-1]] == [
        {"uid": "u1", "text": "hello", "at": AT},
        {"uid": "u2", "text": "wörld \ud800", "at": AT},
    ]
    assert read_logged_uids(log.path) == ["u1", "u2"]


def test_missing_log_is_empty(tmp_path: Path) -> None:
    assert read_logged_uids(tmp_path / "none.inputs.jsonl") == []
    assert count_executions(tmp_path / "no-such-dir") == {}


def test_torn_last_line_is_ignored_and_closed_by_the_next_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.inputs.jsonl"
    path.write_bytes(record("u1") + record("u2")[:17])  # kill -9 in the middle of u2's line
    assert read_logged_uids(path) == ["u1"]

    log = InputLog(path)
    log.append("u3", "after the crash", AT)
    log.close()
    assert read_logged_uids(path) == ["u1", "u3"]
    assert path.read_bytes().endswith(record("u3", "after the crash"))


def test_damaged_and_foreign_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.inputs.jsonl"
    path.write_bytes(
        record("u1")
        + b"garbage\n"
        + b"[1, 2]\n"
        + b'{"uid": 7, "text": "x"}\n'
        + b'{"uid": "", "text": "x"}\n'
        + b'{"uid": "u9"}\n'
        + b"\n"
        + record("u2")
    )
    assert read_logged_uids(path) == ["u1", "u2"]


def test_count_executions_counts_each_uid_across_sessions(tmp_path: Path) -> None:
    (tmp_path / "a.inputs.jsonl").write_bytes(record("u1") + record("u2") + record("u1"))
    (tmp_path / "b.inputs.jsonl").write_bytes(record("u3") + record("u2")[:5])
    (tmp_path / "a.sdk-session").write_text("not a log\n")
    assert count_executions(tmp_path) == {"u1": 2, "u2": 1, "u3": 1}


def test_sdk_session_id_is_created_once_and_kept(tmp_path: Path) -> None:
    assert load_or_create_sdk_session_id(tmp_path, "s1", "first") == "first"
    assert load_or_create_sdk_session_id(tmp_path, "s1", "second") == "first"
    assert load_or_create_sdk_session_id(tmp_path, "s2", "other") == "other"
    assert (tmp_path / "s1.sdk-session").read_text() == "first\n"
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    "session_id", ["", "..", "../x", "a/b", ".hidden", "x" * 129, "a b", "é", None]
)
def test_unsafe_session_ids_are_refused(tmp_path: Path, session_id: str) -> None:
    with pytest.raises(DriverError, match="session id must be 1-128 characters"):
        inputs_path(tmp_path, session_id)


@pytest.mark.parametrize("session_id", ["0b7f9a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "s1", "A.b_c-9"])
def test_safe_session_ids_are_accepted(session_id: str) -> None:
    assert validate_session_id(session_id) == session_id
