"""``codedeck-bridge desiide`` with a stdin other than the editor's pipe: the real command.

The editor forks the orchestrator with a pipe, but a manual run or a script may hand it anything:
``/dev/null``, a file of requests, a pipe already closed, no stdin at all. Each is a stream with
an end, and its end is EOF: the process answers what it read, exits 0, and logs no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from bridge.control.framing import FrameDecoder, encode_frame

REPO = Path(__file__).resolve().parents[3]
TIMEOUT = 15.0
"""Far above what a run takes: a hang fails the test instead of the suite's timeout."""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "1.0.0",
        "client": {"name": "desiide", "version": "0.3.0"},
        "workspaceRoots": [],
    },
}


def run_desiide(
    home: Path, stdin: int | IO[bytes] | None, *, close_stdin: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m bridge desiide --home <home>`` as a user would, stdin as given."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    for name in ("CODEDECK_HOME", "NOTIFY_SOCKET"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "bridge", "desiide", "--home", str(home)],
        stdin=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        env=env,
        cwd=REPO,
        check=False,
        preexec_fn=(lambda: os.close(0)) if close_stdin else None,
    )


def assert_clean_end(done: subprocess.CompletedProcess[bytes]) -> None:
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert '"level": "ERROR"' not in stderr
    assert "the editor's connection ended (eof)" in stderr


def answers(stdout: bytes) -> list[Any]:
    return [json.loads(body) for body in FrameDecoder().feed(stdout)]


def test_stdin_from_dev_null_is_an_immediate_eof(tmp_path: Path) -> None:
    with open(os.devnull, "rb") as devnull:
        done = run_desiide(tmp_path / "home", devnull)
    assert_clean_end(done)
    assert done.stdout == b""


def test_a_regular_file_is_read_as_the_stream(tmp_path: Path) -> None:
    requests = tmp_path / "requests"
    requests.write_bytes(encode_frame(json.dumps(INITIALIZE).encode()))
    with requests.open("rb") as stdin:
        done = run_desiide(tmp_path / "home", stdin)
    assert_clean_end(done)
    [answer] = answers(done.stdout)
    assert answer["id"] == 1
    assert answer["result"]["protocolVersion"] == "1.0.0"
    assert answer["result"]["server"]["name"] == "codedeck-bridge"


def test_a_pipe_closed_at_once_is_eof(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(write_end)
    try:
        done = run_desiide(tmp_path / "home", read_end)
    finally:
        os.close(read_end)
    assert_clean_end(done)
    assert done.stdout == b""


def test_a_closed_stdin_is_eof(tmp_path: Path) -> None:
    done = run_desiide(tmp_path / "home", None, close_stdin=True)
    assert_clean_end(done)
    assert done.stdout == b""
