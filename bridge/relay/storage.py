"""The embedded relay's event store: SQLite, one file, answering NIP-01 filters completely.

Why SQLite and not a key-value store: a phone's query is ``authors`` + ``kinds`` + ``#p`` +
``since``, and it must get *every* stored event that matches (the CodeDeck app does not page).
With an index on the tags and one on (author, kind, time) SQLite answers that exactly, newest
first, with NIP-01's tie-break; the LMDB store of rust-nostr's LocalRelay answers the same
filter with a capped set that is not the newest (docs/BENCHMARKS.md).

Durability: WAL with ``synchronous=NORMAL``. A commit is in the WAL (the OS's page cache) before
the relay answers ``OK``, so a ``kill -9`` of the daemon loses nothing the relay acknowledged;
a power cut can lose the last transactions, as with strfry's default LMDB settings. Every
event kept here is also a message the bridge can send again (responses expire after an hour;
the heartbeat is re-published at start), so the cost of fsyncing every event is not worth it.

Deletion (NIP-09): a kind-5 event deletes the events its ``e`` tags name and the addressable
versions its ``a`` tags name, when they have the same author; the deletion itself is kept, and
so keeps a deleted event from being stored again. Expiry (NIP-40): an expired event is never
served, and :meth:`EventStore.purge_expired` removes them.

Size cap: the JSON of the kept events may total at most ``max_bytes`` (the indexes and SQLite's
own pages come on top: about as much again for the small CodeDeck events). A put that would pass
the cap is refused (:attr:`Put.FULL`) and nothing kept is touched; a replacement counts only what
it adds, so a heartbeat that replaces its predecessor still fits. The running total is kept in
memory, read once at open and adjusted by every insert and delete (replacements, deletions, the
expiry purge), so the check costs nothing per event.

Indexes: by id, by (author, kind, time), by (kind, time), tags by (name, value), and the address
of the events kept one per address. Each index costs every write, so there is none for time
alone or for expiry (the purge, once a minute, scans).

Not thread-safe: one relay thread owns the store (the connection allows being opened in one
thread and used in another, which the relay's start-up needs).
"""

from __future__ import annotations

import enum
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bridge.nostr.event import Event, expiration_of
from bridge.nostr.filters import Filter
from bridge.relay.classes import StorageClass, address_of, is_newer, storage_class

__all__ = [
    "EventStore",
    "Put",
]

DELETION_KIND = 5

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    pubkey TEXT NOT NULL,
    kind INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    address TEXT,
    json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_author ON events (pubkey, kind, created_at);
CREATE INDEX IF NOT EXISTS events_kind ON events (kind, created_at);
CREATE INDEX IF NOT EXISTS events_address ON events (pubkey, kind, address)
    WHERE address IS NOT NULL;
CREATE TABLE IF NOT EXISTS tags (
    event INTEGER NOT NULL REFERENCES events (seq) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tags_lookup ON tags (name, value, event);
CREATE INDEX IF NOT EXISTS tags_event ON tags (event);
"""


class Put(enum.Enum):
    """What :meth:`EventStore.put` did, which decides the relay's ``OK``."""

    STORED = "stored"
    """Kept (a replaced older version, if any, is gone)."""
    DUPLICATE = "duplicate"
    """The same id is already kept: ``OK true "duplicate: …"``, nothing to broadcast."""
    HAVE_NEWER = "have_newer"
    """A newer version of this replaceable/addressable event is kept: not stored."""
    DELETED = "deleted"
    """Its author deleted it (NIP-09) before it arrived here: not stored."""
    FULL = "full"
    """Keeping it would pass the store's size cap: not stored, nothing kept was touched."""


def _connect(path: Path | None) -> sqlite3.Connection:
    if path is None:
        db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    else:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Create the file 0600 ourselves: sqlite3 would use the umask, and the WAL and shm
        # files it makes later copy the database file's mode.
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    db.executescript(_SCHEMA)
    return db


def _in(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def _filter_sql(one: Filter, now: int, cap: int) -> tuple[str, list[Any]] | None:
    """The SELECT for one filter (None when it cannot match anything, e.g. ``limit: 0``)."""
    limit = cap if one.limit is None else min(one.limit, cap)
    if limit <= 0:
        return None
    where = ["(expires_at IS NULL OR expires_at > ?)"]
    args: list[Any] = [now]
    for column, values in (("id", one.ids), ("pubkey", one.authors), ("kind", one.kinds)):
        if values is None:
            continue
        if not values:
            return None
        where.append(f"{column} IN ({_in(values)})")
        args.extend(values)
    if one.since is not None:
        where.append("created_at >= ?")
        args.append(one.since)
    if one.until is not None:
        where.append("created_at <= ?")
        args.append(one.until)
    for letter, values in one.tags.items():
        if not values:
            return None
        where.append(f"seq IN (SELECT event FROM tags WHERE name = ? AND value IN ({_in(values)}))")
        args.append(letter)
        args.extend(values)
    sql = (
        f"SELECT id, json FROM events WHERE {' AND '.join(where)} "
        "ORDER BY created_at DESC, id ASC LIMIT ?"
    )
    args.append(limit)
    return sql, args


_SIZE = "length(CAST(json AS BLOB))"
"""The stored size of an event: its JSON's bytes."""


class EventStore:
    """Stored events of one relay. ``path=None`` keeps them in memory (tests, benchmarks).

    Args:
        path: the SQLite file, or None.
        max_bytes: the cap on the kept events' JSON, in bytes; None for no cap.
    """

    def __init__(self, path: Path | None, *, max_bytes: int | None = None) -> None:
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.path = path
        self.max_bytes = max_bytes
        self._db = _connect(path)
        self._bytes = self._measure()
        # Whether any deletion was ever stored: until one is, no event can be a deleted one,
        # and the tombstone lookup (a join, on every event) is skipped.
        self._has_deletions = (
            self._db.execute(
                "SELECT 1 FROM events WHERE kind = ? LIMIT 1", (DELETION_KIND,)
            ).fetchone()
            is not None
        )

    def close(self) -> None:
        self.commit()
        self._db.close()

    @property
    def stored_bytes(self) -> int:
        """The JSON bytes of the kept events (expired ones not yet purged included)."""
        return self._bytes

    def _measure(self) -> int:
        row = self._db.execute(f"SELECT coalesce(sum({_SIZE}), 0) FROM events").fetchone()
        return int(row[0])

    def has(self, event_id: str) -> bool:
        """True when an event with this id is kept."""
        row = self._db.execute("SELECT 1 FROM events WHERE id = ?", (event_id,)).fetchone()
        return row is not None

    def put(self, event: Event, event_json: str, *, commit: bool = True) -> Put:
        """Keep ``event`` (already verified and admitted) under its storage class's rule.

        ``event_json`` is its compact JSON, served as it is. Ephemeral events are not for
        the store (the relay never calls this with one). The event and the predecessors it
        replaces or deletes change together or not at all. With ``commit=False`` the change
        joins the open transaction, made durable by :meth:`commit`: the relay commits a burst of
        events at once and answers their ``OK`` after it (group commit).
        """
        cls = storage_class(event.kind)
        if cls is StorageClass.EPHEMERAL:
            raise ValueError("ephemeral events are not stored")
        db = self._db
        if not db.in_transaction:
            db.execute("BEGIN IMMEDIATE")
        db.execute("SAVEPOINT put")
        counted = self._bytes
        try:
            result = self._put(event, event_json, address_of(event))
        except BaseException:
            db.execute("ROLLBACK TO put")
            db.execute("RELEASE put")
            self._bytes = counted
            raise
        db.execute("RELEASE put")
        if commit:
            self.commit()
        return result

    def rollback(self) -> None:
        """Forget every change since the last commit (after a commit failed)."""
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
        self._bytes = self._measure()

    def commit(self) -> None:
        """Make every change since the last commit durable (a no-op without changes)."""
        if self._db.in_transaction:
            self._db.execute("COMMIT")

    def _put(self, event: Event, event_json: str, address: str | None) -> Put:
        db = self._db
        if self._has_deletions and self._is_deleted(event, address):
            return Put.DELETED
        size = len(event_json.encode())
        replaced: int | None = None
        if address is not None:
            row = db.execute(
                f"SELECT seq, created_at, id, {_SIZE} FROM events WHERE pubkey = ? AND kind = ? "
                "AND address = ?",
                (event.pubkey, event.kind, address),
            ).fetchone()
            if row is not None:
                if row[2] == event.id:
                    return Put.DUPLICATE
                if not is_newer(event.created_at, event.id, row[1], row[2]):
                    return Put.HAVE_NEWER
                replaced = int(row[0])
                size -= int(row[3])
        if self.max_bytes is not None and size > 0 and self._bytes + size > self.max_bytes:
            return Put.DUPLICATE if self.has(event.id) else Put.FULL
        if replaced is not None:
            db.execute("DELETE FROM events WHERE seq = ?", (replaced,))
        try:
            cursor = db.execute(
                "INSERT INTO events (id, pubkey, kind, created_at, expires_at, address, json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    event.id,
                    event.pubkey,
                    event.kind,
                    event.created_at,
                    expiration_of(event),
                    address,
                    event_json,
                ),
            )
        except sqlite3.IntegrityError:  # the id is UNIQUE: the same event again
            return Put.DUPLICATE
        self._bytes += size
        seq = cursor.lastrowid
        tags = [(seq, tag[0], tag[1]) for tag in event.tags if len(tag) >= 2 and len(tag[0]) == 1]
        if tags:
            db.executemany("INSERT INTO tags (event, name, value) VALUES (?, ?, ?)", tags)
        if event.kind == DELETION_KIND:
            self._has_deletions = True
            self._apply_deletion(event)
        return Put.STORED

    def _is_deleted(self, event: Event, address: str | None) -> bool:
        """A kind-5 event of the same author already names this event (or its address)."""
        if event.kind == DELETION_KIND:
            return False
        db = self._db
        by_id = db.execute(
            "SELECT 1 FROM tags JOIN events ON events.seq = tags.event "
            "WHERE tags.name = 'e' AND tags.value = ? AND events.kind = ? AND events.pubkey = ?",
            (event.id, DELETION_KIND, event.pubkey),
        ).fetchone()
        if by_id is not None:
            return True
        if address is None or storage_class(event.kind) is not StorageClass.ADDRESSABLE:
            return False
        coordinate = f"{event.kind}:{event.pubkey}:{address}"
        by_address = db.execute(
            "SELECT 1 FROM tags JOIN events ON events.seq = tags.event "
            "WHERE tags.name = 'a' AND tags.value = ? AND events.kind = ? AND events.pubkey = ? "
            "AND events.created_at >= ?",
            (coordinate, DELETION_KIND, event.pubkey, event.created_at),
        ).fetchone()
        return by_address is not None

    def _apply_deletion(self, deletion: Event) -> None:
        db = self._db
        for tag in deletion.tags:
            if len(tag) < 2:
                continue
            if tag[0] == "e":
                self._forget(
                    db.execute(
                        f"DELETE FROM events WHERE id = ? AND pubkey = ? AND kind != ? "
                        f"RETURNING {_SIZE}",
                        (tag[1], deletion.pubkey, DELETION_KIND),
                    )
                )
            elif tag[0] == "a":
                kind_text, _, rest = tag[1].partition(":")
                pubkey, _, address = rest.partition(":")
                if pubkey != deletion.pubkey or not kind_text.isdigit():
                    continue  # only an author may delete their own events
                self._forget(
                    db.execute(
                        f"DELETE FROM events WHERE pubkey = ? AND kind = ? AND address = ? "
                        f"AND created_at <= ? RETURNING {_SIZE}",
                        (pubkey, int(kind_text), address, deletion.created_at),
                    )
                )

    def _forget(self, deleted: sqlite3.Cursor) -> int:
        """Take the sizes a ``DELETE … RETURNING`` gave off the total; returns how many rows."""
        sizes = [int(row[0]) for row in deleted]
        self._bytes -= sum(sizes)
        return len(sizes)

    def query(self, filters: Iterable[Filter], now: int, cap: int) -> list[str]:
        """The JSON of every kept, unexpired event matching any filter, newest first per filter.

        Each filter returns at most ``min(limit, cap)`` events (``cap`` alone when it has no
        ``limit``), chosen newest first with the lower id first on a tie (NIP-01); an event
        matched by two filters of one REQ is returned once.
        """
        seen: set[str] = set()
        out: list[str] = []
        for one in filters:
            built = _filter_sql(one, now, cap)
            if built is None:
                continue
            sql, args = built
            for event_id, event_json in self._db.execute(sql, args):
                if event_id not in seen:
                    seen.add(event_id)
                    out.append(event_json)
        return out

    def purge_expired(self, now: int) -> int:
        """Remove events whose NIP-40 expiry has passed; returns how many."""
        return self._forget(
            self._db.execute(
                f"DELETE FROM events WHERE expires_at IS NOT NULL AND expires_at <= ? "
                f"RETURNING {_SIZE}",
                (now,),
            )
        )

    def count(self) -> int:
        """How many events are kept (expired ones not yet purged included)."""
        row = self._db.execute("SELECT count(*) FROM events").fetchone()
        return int(row[0])
