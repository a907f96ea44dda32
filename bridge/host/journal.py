"""The session host's journal: every event its agent produced, durable, in order, by seq.

A session host outlives the daemon (see :mod:`bridge.host`). While the daemon is away, the
agent keeps working; what it produces must wait somewhere that survives a ``kill -9`` of the host
too, so that the daemon, when it comes back, can replay exactly what it missed — by sequence,
each event once, no hole, no duplicate. This module is that somewhere.

Rules:

* **Seqs are assigned here, and never renumbered.** The first event is seq 1; each append takes
  the next. Trimming (the daemon has everything up to N) drops records but never changes a seq,
  and the next seq survives a trim of everything and any number of restarts.
* **Nothing leaves before it is durable.** :meth:`Journal.append` returns the seq once the record
  is written (and ``fdatasync``'d, unless opened with ``sync=False`` for tests). The host sends
  an event to the daemon only after that, so a record lost in a crash was never seen by anyone,
  and its seq may be taken again by the next event.
* **A torn tail is recovered, anything else fails loud.** A crash mid-append leaves an incomplete
  or unchecked last record; :meth:`Journal.open` cuts it off (logged with the bytes dropped). A
  bad record followed by good ones is not a crash but damage: :class:`JournalCorrupt`, never a
  silent skip.
* **One writer.** A sibling ``.lock`` file is held with ``flock`` for the journal's lifetime
  (the journal file itself is replaced by :meth:`Journal.trim`, the lock file never is): a second
  host on the same journal gets :class:`JournalLocked`.
* Files are created 0600 in a directory created 0700 (the journal holds what the agent said,
  which can quote anything from the workspace).

File layout (big-endian)::

    header   b"CDJ1"  u64 first_seq
    record   u32 length  u32 crc32(seq ‖ payload)  u64 seq  payload (length bytes, JSON object)

Synchronous on purpose: an append is one ``pwrite`` and one ``fdatasync`` (well under a
millisecond to a few ms), and the host must not answer anything before it returned; callers on an
event loop that cannot afford the fsync wait run it in a thread. Not thread-safe: one owner.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from bridge.records import record

__all__ = [
    "MAX_RECORD_BYTES",
    "Journal",
    "JournalCorrupt",
    "JournalError",
    "JournalLocked",
    "Recovery",
]

logger = logging.getLogger(__name__)

MAGIC = b"CDJ1"
_HEADER = struct.Struct(">4sQ")
_RECORD = struct.Struct(">IIQ")
_SEQ = struct.Struct(">Q")
MAX_RECORD_BYTES = 16 * 1024 * 1024
"""The largest payload one record may hold (a tool result is cut long before this)."""
_COPY_CHUNK = 1024 * 1024


class JournalError(Exception):
    """The journal cannot be used; the message says which file and why."""


class JournalCorrupt(JournalError):
    """The file holds damage that is not a torn tail: it is left as it is, for a human."""


class JournalLocked(JournalError):
    """Another process holds this journal."""


@record
class Recovery:
    """What :meth:`Journal.open` found."""

    records: int
    """Complete records kept."""
    dropped_bytes: int
    """Bytes of a torn tail that were cut off (0 after a clean stop)."""


class Journal:
    """An open journal; see the module docstring. Build it with :meth:`open`."""

    def __init__(
        self,
        path: Path,
        fd: int,
        lock_fd: int,
        first_seq: int,
        offsets: list[int],
        size: int,
        *,
        sync: bool,
        recovery: Recovery,
    ) -> None:
        self.path = path
        self._fd = fd
        self._lock_fd = lock_fd
        self._first_seq = first_seq
        self._offsets = offsets
        self._size = size
        self._sync = sync
        self.recovery = recovery

    # --- opening ---------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, sync: bool = True, floor: int = 0) -> Journal:
        """Open (or create) the journal at `path`, recovering a torn tail.

        Args:
            path: the journal file (its directory is created 0700).
            sync: fsync every write (False only in tests).
            floor: the reader's cursor: every seq up to `floor` is already consumed. A journal
                whose next seq is not above it (a new file, or one whose records were all
                consumed and whose file was replaced) starts again at ``floor + 1``, so a new
                record can never take a seq the reader would skip as seen.

        Raises:
            JournalLocked: another process has it open.
            JournalCorrupt: damage that is not a torn tail.
            JournalError: the file cannot be created or read (the OS error says why).
        """
        path = Path(path)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            lock_fd = _lock(path)
        except OSError as exc:
            raise JournalError(f"journal {path}: {exc.strerror or exc}") from None
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_tmp_path(path))  # a trim that died before its rename
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            os.close(lock_fd)
            raise JournalError(f"journal {path}: {exc.strerror or exc}") from None
        try:
            first_seq, offsets, size, dropped = _scan(path, fd, sync=sync)
        except BaseException:
            os.close(fd)
            os.close(lock_fd)
            raise
        if first_seq + len(offsets) <= floor:
            # Every record is consumed already; start the numbering above the reader's cursor.
            try:
                first_seq, offsets, size = _restart_at(path, fd, floor + 1, sync=sync)
            except OSError as exc:
                os.close(fd)
                os.close(lock_fd)
                raise JournalError(f"journal {path}: {exc.strerror or exc}") from None
        recovery = Recovery(records=len(offsets), dropped_bytes=dropped)
        if dropped:
            logger.warning(
                "! journal %s: cut off a torn last record (%d bytes) left by a crash; it was "
                "never sent, so nothing is lost",
                path,
                dropped,
            )
        return cls(path, fd, lock_fd, first_seq, offsets, size, sync=sync, recovery=recovery)

    # --- the seqs --------------------------------------------------------------------------------

    @property
    def first_seq(self) -> int:
        """The seq of the oldest record kept (equal to :attr:`next_seq` when none is)."""
        return self._first_seq

    @property
    def next_seq(self) -> int:
        """The seq the next append gets."""
        return self._first_seq + len(self._offsets)

    @property
    def last_seq(self) -> int:
        """The seq of the newest record ever appended and kept (0 before the first)."""
        return self.next_seq - 1

    def __len__(self) -> int:
        return len(self._offsets)

    # --- writing ---------------------------------------------------------------------------------

    def append(self, payload: Mapping[str, Any]) -> int:
        """Write one record; its seq, once it is durable.

        Raises:
            ValueError: the payload is not JSON-serializable or is too large (nothing written).
            JournalError: the write failed (the journal is unchanged).
        """
        return self.append_many([payload])[0]

    def append_many(self, payloads: Sequence[Mapping[str, Any]]) -> list[int]:
        """Write several records with one sync; their seqs, once all are durable.

        Raises:
            ValueError: a payload is not JSON-serializable or is too large (nothing written).
            JournalError: the write failed (the journal is unchanged).
        """
        self._check_open()
        frames: list[bytes] = []
        seq = self.next_seq
        for payload in payloads:
            frames.append(_frame(seq, payload))
            seq += 1
        data = b"".join(frames)
        start = self._size
        try:
            _write_all(self._fd, data, start)
            if self._sync:
                os.fdatasync(self._fd)
        except OSError as exc:
            # Leave the file as it was: a half-written batch was never acknowledged.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise JournalError(f"journal {self.path}: append failed: {exc.strerror}") from None
        seqs = []
        offset = start
        for frame in frames:
            seqs.append(self.next_seq)
            self._offsets.append(offset)
            offset += len(frame)
        self._size = offset
        return seqs

    def trim(self, through: int) -> None:
        """Drop every record with a seq up to `through` (the daemon holds them durably).

        The seqs of the records kept, and the next seq, do not change. Replaces the file
        atomically: a crash during a trim leaves the journal as it was before it.

        Raises:
            ValueError: `through` is at or past :attr:`next_seq` (nobody can hold those yet).
            JournalError: the new file could not be written (the journal is unchanged).
        """
        self._check_open()
        if through >= self.next_seq:
            raise ValueError(f"cannot trim through seq {through}: the last seq is {self.last_seq}")
        if through < self._first_seq:
            return
        keep_from = through + 1 - self._first_seq
        start = self._offsets[keep_from] if keep_from < len(self._offsets) else self._size
        tmp = _tmp_path(self.path)
        try:
            new_fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise JournalError(f"journal {self.path}: trim failed: {exc.strerror}") from None
        try:
            _write_all(new_fd, _HEADER.pack(MAGIC, through + 1), 0)
            written = _HEADER.size
            position = start
            while position < self._size:
                chunk = os.pread(self._fd, min(_COPY_CHUNK, self._size - position), position)
                _write_all(new_fd, chunk, written)
                written += len(chunk)
                position += len(chunk)
            if self._sync:
                os.fsync(new_fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            os.close(new_fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise JournalError(f"journal {self.path}: trim failed: {exc.strerror}") from None
        # The new file is the journal now; follow it before anything else can fail.
        os.close(self._fd)
        self._fd = new_fd
        shift = start - _HEADER.size
        self._offsets = [offset - shift for offset in self._offsets[keep_from:]]
        self._first_seq = through + 1
        self._size = written
        if self._sync:
            try:
                _fsync_dir(self.path.parent)
            except OSError as exc:
                raise JournalError(
                    f"journal {self.path}: trimmed, but the directory sync failed: {exc.strerror}"
                ) from None

    # --- reading ---------------------------------------------------------------------------------

    def read(self, after: int = 0, limit: int | None = None) -> list[tuple[int, dict[str, Any]]]:
        """The records with a seq greater than `after`, oldest first (at most `limit`).

        Raises:
            JournalCorrupt: a record no longer matches its checksum (the disk changed under us).
        """
        self._check_open()
        index = max(0, after + 1 - self._first_seq)
        stop = len(self._offsets) if limit is None else min(len(self._offsets), index + limit)
        out: list[tuple[int, dict[str, Any]]] = []
        for i in range(index, stop):
            offset = self._offsets[i]
            end = self._offsets[i + 1] if i + 1 < len(self._offsets) else self._size
            raw = os.pread(self._fd, end - offset, offset)
            seq = self._first_seq + i
            payload = _parse(raw, seq)
            if payload is None:
                raise JournalCorrupt(
                    f"journal {self.path}: record {seq} no longer matches its checksum"
                )
            out.append((seq, payload))
        return out

    # --- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the file and the lock (idempotent)."""
        if self._fd < 0:
            return
        os.close(self._fd)
        os.close(self._lock_fd)
        self._fd = self._lock_fd = -1

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._fd < 0:
            raise JournalError(f"journal {self.path} is closed")


# --- the file format -------------------------------------------------------------------------------


def _frame(seq: int, payload: Mapping[str, Any]) -> bytes:
    if not isinstance(payload, Mapping):
        raise ValueError("a journal record must be a JSON object")
    try:
        body = orjson.dumps(dict(payload))
    except TypeError as exc:
        raise ValueError(f"a journal record must be JSON: {exc}") from None
    if len(body) > MAX_RECORD_BYTES:
        raise ValueError(f"a journal record is at most {MAX_RECORD_BYTES} bytes, not {len(body)}")
    seq_bytes = _SEQ.pack(seq)
    crc = zlib.crc32(body, zlib.crc32(seq_bytes))
    return _RECORD.pack(len(body), crc, seq) + body


def _parse(raw: bytes, seq: int) -> dict[str, Any] | None:
    """The payload of one whole record at `seq`, or None when it does not check out."""
    if len(raw) < _RECORD.size:
        return None
    length, crc, stored_seq = _RECORD.unpack_from(raw)
    body = raw[_RECORD.size :]
    if stored_seq != seq or len(body) != length:
        return None
    if zlib.crc32(body, zlib.crc32(_SEQ.pack(seq))) != crc:
        return None
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return payload if isinstance(payload, dict) else None


def _scan(path: Path, fd: int, *, sync: bool) -> tuple[int, list[int], int, int]:
    """(first seq, record offsets, good size, bytes dropped); writes a header to a new file."""
    size = os.fstat(fd).st_size
    if size < _HEADER.size:
        # New, or a crash while writing the header: no record can exist yet.
        _write_all(fd, _HEADER.pack(MAGIC, 1), 0)
        os.ftruncate(fd, _HEADER.size)
        if sync:
            os.fsync(fd)
            _fsync_dir(path.parent)
        return 1, [], _HEADER.size, 0
    magic, first_seq = _HEADER.unpack(os.pread(fd, _HEADER.size, 0))
    if magic != MAGIC or first_seq < 1:
        raise JournalCorrupt(f"journal {path}: not a journal (bad header); move it aside")
    offsets: list[int] = []
    offset = _HEADER.size
    while offset < size:
        seq = first_seq + len(offsets)
        head = os.pread(fd, _RECORD.size, offset)
        if len(head) < _RECORD.size:
            break  # torn: the record header itself is incomplete
        length, _crc, stored_seq = _RECORD.unpack(head)
        end = offset + _RECORD.size + length
        if length > MAX_RECORD_BYTES or end > size:
            # Either a record cut short by the crash or a damaged length; only the tail may be.
            if _any_record_after(fd, offset + 1, size, seq):
                raise JournalCorrupt(f"journal {path}: record {seq} is damaged; move it aside")
            break
        if stored_seq != seq or _parse(os.pread(fd, end - offset, offset), seq) is None:
            if end < size:
                raise JournalCorrupt(
                    f"journal {path}: record {seq} at byte {offset} is damaged and records "
                    "follow it; move the file aside"
                )
            break  # the last record, written only in part
        offsets.append(offset)
        offset = end
    dropped = size - offset
    if dropped:
        os.ftruncate(fd, offset)
        if sync:
            os.fsync(fd)
    return first_seq, offsets, offset, dropped


def _restart_at(path: Path, fd: int, first_seq: int, *, sync: bool) -> tuple[int, list[int], int]:
    """Empty the journal in place and number from `first_seq` on (all it held was consumed)."""
    # Records first, then the header: a crash in between leaves an empty journal numbered as
    # before, which the next open restarts the same way.
    os.ftruncate(fd, _HEADER.size)
    _write_all(fd, _HEADER.pack(MAGIC, first_seq), 0)
    if sync:
        os.fsync(fd)
    return first_seq, [], _HEADER.size


def _any_record_after(fd: int, start: int, size: int, seq: int) -> bool:
    """Whether a whole, valid record of `seq` or `seq + 1` begins anywhere from `start` on.

    Tells a torn tail (nothing valid follows) from a damaged length in the middle of the file.
    Only runs on the rare bad record, so a linear search is fine.
    """
    data = os.pread(fd, size - start, start)
    for candidate in (seq, seq + 1):
        marker = _SEQ.pack(candidate)
        position = data.find(marker)
        while position != -1:
            record_start = position - 8  # the seq sits after the u32 length and the u32 crc
            if record_start >= 0:
                length = struct.unpack_from(">I", data, record_start)[0]
                end = record_start + _RECORD.size + length
                if end <= len(data) and _parse(data[record_start:end], candidate) is not None:
                    return True
            position = data.find(marker, position + 1)
    return False


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def _lock(path: Path) -> int:
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise JournalLocked(
            f"journal {path} is open in another process (its session host is still running)"
        ) from None
    return fd


def _tmp_path(path: Path) -> Path:
    return path.with_name(path.name + ".trim")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
