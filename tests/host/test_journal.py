"""The session host's journal: seqs never renumbered, torn tails recovered, damage loud."""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.host import journal as journal_module
from bridge.host.journal import (
    MAX_RECORD_BYTES,
    Journal,
    JournalCorrupt,
    JournalError,
    JournalLocked,
)


def journal_at(tmp_path: Path, **options: Any) -> Journal:
    return Journal.open(tmp_path / "host" / "journal", sync=False, **options)


def entry(n: int) -> dict[str, Any]:
    return {"type": "entry", "n": n, "text": f"line {n} ✓"}


def test_seqs_start_at_one_and_survive_a_reopen(tmp_path: Path) -> None:
    with journal_at(tmp_path) as journal:
        assert (journal.first_seq, journal.next_seq, journal.last_seq) == (1, 1, 0)
        assert [journal.append(entry(n)) for n in range(3)] == [1, 2, 3]
        assert journal.append_many([entry(3), entry(4)]) == [4, 5]
    with journal_at(tmp_path) as journal:
        assert journal.recovery.records == 5 and journal.recovery.dropped_bytes == 0
        assert journal.read() == [(n + 1, entry(n)) for n in range(5)]
        assert journal.read(after=3) == [(4, entry(3)), (5, entry(4))]
        assert journal.read(after=1, limit=2) == [(2, entry(1)), (3, entry(2))]
        assert journal.append(entry(5)) == 6


def test_files_are_private(tmp_path: Path) -> None:
    with journal_at(tmp_path) as journal:
        journal.append(entry(0))
        journal.trim(1)
    directory = tmp_path / "host"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_trim_keeps_the_seqs_even_when_everything_goes(tmp_path: Path) -> None:
    with journal_at(tmp_path) as journal:
        journal.append_many([entry(n) for n in range(10)])
        journal.trim(4)
        assert (journal.first_seq, len(journal)) == (5, 6)
        assert journal.read()[0] == (5, entry(4))
        journal.trim(2)  # already gone: nothing to do
        assert journal.first_seq == 5
        journal.trim(10)
        assert (journal.first_seq, journal.next_seq, journal.read()) == (11, 11, [])
    with journal_at(tmp_path) as journal:
        assert journal.next_seq == 11  # a trim of everything does not reset the count
        assert journal.append(entry(10)) == 11
        assert journal.read() == [(11, entry(10))]


def test_trim_cannot_drop_what_was_never_written(tmp_path: Path) -> None:
    with journal_at(tmp_path) as journal:
        journal.append(entry(0))
        with pytest.raises(ValueError, match="the last seq is 1"):
            journal.trim(2)


def test_the_same_process_cannot_open_it_twice(tmp_path: Path) -> None:
    with journal_at(tmp_path), pytest.raises(JournalLocked):
        journal_at(tmp_path)


@pytest.mark.parametrize(
    "payload",
    [{"bad": object()}, ["not", "an", "object"], {"big": "x" * (MAX_RECORD_BYTES + 1)}],
    ids=["not-json", "not-an-object", "too-big"],
)
def test_a_bad_payload_writes_nothing(tmp_path: Path, payload: Any) -> None:
    with journal_at(tmp_path) as journal:
        journal.append(entry(0))
        with pytest.raises(ValueError):
            journal.append(payload)
        assert journal.append(entry(1)) == 2
    with journal_at(tmp_path) as journal:
        assert journal.read() == [(1, entry(0)), (2, entry(1))]


def test_every_torn_tail_is_cut_off_and_the_seq_reused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash at any byte of the last append: the records before it are all still there."""
    with journal_at(tmp_path) as journal:
        journal.append_many([entry(0), entry(1)])
        whole = journal.path.read_bytes()
        journal.append(entry(2))
        full = journal.path.read_bytes()
    path = tmp_path / "host" / "journal"
    caplog.set_level(logging.WARNING, logger="bridge.host.journal")
    for cut in range(len(whole), len(full)):
        path.write_bytes(full[:cut])
        caplog.clear()
        with journal_at(tmp_path) as journal:
            assert journal.read() == [(1, entry(0)), (2, entry(1))], cut
            assert journal.recovery.dropped_bytes == cut - len(whole)
            assert (cut == len(whole)) == ("torn" not in caplog.text)
            assert journal.append(entry(9)) == 3  # never sent, so its seq is free again
        assert path.stat().st_size > len(whole)


def test_a_torn_header_of_a_new_journal_starts_it_again(tmp_path: Path) -> None:
    path = tmp_path / "host" / "journal"
    path.parent.mkdir(mode=0o700)
    path.write_bytes(b"CDJ")
    with journal_at(tmp_path) as journal:
        assert journal.append(entry(0)) == 1


def test_a_garbled_last_record_is_a_torn_tail(tmp_path: Path) -> None:
    with journal_at(tmp_path) as journal:
        journal.append_many([entry(0), entry(1)])
    path = tmp_path / "host" / "journal"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # inside the last payload
    path.write_bytes(bytes(data))
    with journal_at(tmp_path) as journal:
        assert journal.read() == [(1, entry(0))]


@pytest.mark.parametrize("where", ["payload", "length", "seq"])
def test_damage_before_good_records_fails_loud_and_keeps_the_file(
    tmp_path: Path, where: str
) -> None:
    with journal_at(tmp_path) as journal:
        journal.append_many([entry(n) for n in range(4)])
        offsets = list(journal._offsets)
    path = tmp_path / "host" / "journal"
    data = bytearray(path.read_bytes())
    at = offsets[1] + {"payload": 20, "length": 0, "seq": 15}[where]
    data[at] ^= 0x7F
    path.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt, match="record 2"):
        journal_at(tmp_path)
    assert path.read_bytes() == bytes(data)  # nothing cut off: a human decides


def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "host" / "journal"
    path.parent.mkdir(mode=0o700)
    path.write_bytes(b"something else entirely")
    with pytest.raises(JournalCorrupt, match="not a journal"):
        journal_at(tmp_path)


def test_bit_rot_after_open_is_caught_on_read(tmp_path: Path) -> None:
    with journal_at(tmp_path) as journal:
        journal.append_many([entry(0), entry(1)])
        with open(journal.path, "r+b") as raw:
            raw.seek(-2, os.SEEK_END)
            raw.write(b"!!")
        assert journal.read(limit=1) == [(1, entry(0))]
        with pytest.raises(JournalCorrupt, match="record 2"):
            journal.read()


def test_a_stale_trim_file_is_removed(tmp_path: Path) -> None:
    with journal_at(tmp_path) as journal:
        journal.append(entry(0))
    stale = tmp_path / "host" / "journal.trim"
    stale.write_bytes(b"half a trim")
    with journal_at(tmp_path) as journal:
        assert journal.read() == [(1, entry(0))]
    assert not stale.exists()


def test_a_closed_journal_refuses_work(tmp_path: Path) -> None:
    journal = journal_at(tmp_path)
    journal.close()
    journal.close()  # idempotent
    with pytest.raises(JournalError, match="closed"):
        journal.append(entry(0))


def test_an_unusable_directory_says_which_file(tmp_path: Path) -> None:
    blocker = tmp_path / "host"
    blocker.write_text("a file where the directory should be")
    with pytest.raises(JournalError, match=str(blocker)):
        journal_at(tmp_path)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4)),
        st.tuples(st.just("trim"), st.integers(0, 12)),
        st.tuples(st.just("reopen"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_against_a_model(tmp_path_factory: pytest.TempPathFactory, ops: list[Any]) -> None:
    """Any mix of appends, trims and reopens: the same records and seqs as a plain dict."""
    base = tmp_path_factory.mktemp("model")
    model: dict[int, dict[str, Any]] = {}
    next_seq = 1
    journal = journal_at(base)
    try:
        for op, arg in ops:
            if op == "append":
                seqs = journal.append_many([entry(next_seq + i) for i in range(arg)])
                assert seqs == list(range(next_seq, next_seq + arg))
                for seq in seqs:
                    model[seq] = entry(seq)
                next_seq += arg
            elif op == "trim":
                through = min(arg, next_seq - 1)
                journal.trim(through)
                model = {seq: payload for seq, payload in model.items() if seq > through}
            else:
                journal.close()
                journal = journal_at(base)
            assert journal.next_seq == next_seq
            assert journal.read() == sorted(model.items())
    finally:
        journal.close()


def test_a_failed_write_leaves_the_journal_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal.open(tmp_path / "host" / "journal", sync=True)
    try:
        journal.append(entry(0))

        def full(_fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(journal_module.os, "fdatasync", full)
        with pytest.raises(JournalError, match="append failed: No space left"):
            journal.append_many([entry(1), entry(2)])
        monkeypatch.undo()
        assert journal.next_seq == 2  # the failed batch took no seq
        assert journal.append(entry(1)) == 2
    finally:
        journal.close()
    with journal_at(tmp_path) as reopened:
        assert reopened.read() == [(1, entry(0)), (2, entry(1))]
