"""``kill -9`` of a process writing the journal, at random moments, again and again.

The writer appends (single records and batches) and trims, and prints each seq on stdout only
once :meth:`~bridge.host.journal.Journal.append` returned (what a host may send on), and each
trim before it starts (from then on, those records may go). After every kill the journal is
reopened here and must hold every printed seq above the last trim asked for, with the payload it
was written with, seqs contiguous;
the next writer continues after them. Seqs are never renumbered across all the kills.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from bridge.host.journal import Journal

pytestmark = pytest.mark.timeout(300)

KILLS = 40

WRITER = r"""
import random, sys
from pathlib import Path
from bridge.host.journal import Journal

journal = Journal.open(Path(sys.argv[1]))
rng = random.Random(int(sys.argv[2]))
print("open", journal.next_seq, flush=True)
while True:
    if rng.random() < 0.05 and journal.last_seq >= journal.first_seq:
        through = rng.randint(journal.first_seq, journal.last_seq)
        print("trimming", through, flush=True)  # the daemon has these: they may go from now on
        journal.trim(through)
        print("trim", through, flush=True)
        continue
    count = rng.choice([1, 1, 1, 3])
    start = journal.next_seq
    payloads = [
        {"seq": start + i, "text": "x" * rng.randint(0, 3000)} for i in range(count)
    ]
    for seq in journal.append_many(payloads):
        print("durable", seq, flush=True)
"""


def read_lines(stream: IO[str], into: list[str]) -> None:
    for line in stream:
        into.append(line.strip())


def test_no_durable_record_is_lost_or_renumbered_by_a_kill(tmp_path: Path) -> None:
    path = tmp_path / "host" / "journal"
    rng = random.Random(1729)
    seen_payload_size: dict[int, int] = {}  # seq → length of its text, as first read back
    trimmed_through = 0
    highest_durable = 0
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    for round_ in range(KILLS):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(round_)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        lines: list[str] = []
        assert proc.stdout is not None
        reader = threading.Thread(target=read_lines, args=(proc.stdout, lines), daemon=True)
        reader.start()
        deadline = time.monotonic() + 30
        while not any(line.startswith("open") for line in lines):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the writer never opened the journal"
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        reader.join(timeout=30)
        assert proc.stderr is not None
        errors = proc.stderr.read()
        proc.stderr.close()
        assert "Traceback" not in errors, errors

        opened = int(lines[0].split()[1])
        assert opened > highest_durable, (opened, lines[:3])
        durable = [int(line.split()[1]) for line in lines if line.startswith("durable ")]
        trims = [int(line.split()[1]) for line in lines if line.startswith("trim ")]
        asked = [int(line.split()[1]) for line in lines if line.startswith("trimming ")]
        if durable:
            assert durable == list(range(durable[0], durable[-1] + 1))
            assert durable[0] >= opened  # nothing printed before was handed out again
            highest_durable = durable[-1]
        if trims:
            trimmed_through = max(trimmed_through, trims[-1])
        may_be_gone = max([trimmed_through, *asked])

        with Journal.open(path) as journal:
            records = journal.read()
            seqs = [seq for seq, _ in records]
            assert seqs == list(range(journal.first_seq, journal.next_seq)), "not contiguous"
            assert journal.first_seq <= may_be_gone + 1  # nothing the daemon lacks is gone
            trimmed_through = journal.first_seq - 1
            assert journal.last_seq >= highest_durable  # every printed seq is still there
            for seq, payload in records:
                assert payload["seq"] == seq  # written under this seq, never renumbered
                size = len(payload["text"])
                assert seen_payload_size.setdefault(seq, size) == size, seq
            highest_durable = max(highest_durable, journal.last_seq)
    assert highest_durable > KILLS  # the writers really wrote between the kills


def test_payload_types_round_trip_as_json(tmp_path: Path) -> None:
    payload: dict[str, Any] = {"a": [1, 2.5, None, True], "b": {"c": "ü"}, "n": 2**53}
    with Journal.open(tmp_path / "j") as journal:
        journal.append(payload)
    with Journal.open(tmp_path / "j") as journal:
        assert journal.read() == [(1, payload)]
