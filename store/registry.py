"""The relay policy's registry database: registered pubkeys and open pairing windows.

One SQLite file (``registry.db``) shared by three kinds of process: the strfry plugin reads it
before every decision, and the admin API and the ``register``/``unregister`` commands write it. WAL
mode lets the plugin read while a writer commits, and ``PRAGMA data_version`` (see
:meth:`RegistryStore.data_version`) tells the plugin cheaply whether anything changed since its
last look, so it reloads its in-memory copy only then.

Tables:

* ``registered_pubkeys(pubkey, label, registered_at)`` — who may write the registered-only kinds.
* ``pairing_windows(pubkey, until)`` — a registered bridge that accepts pairing requests from
  unregistered phone keys until ``until`` (unix seconds, exclusive). Removed with its pubkey.

This module stores and validates; it holds no policy and reads no clock (``now`` is a parameter).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from store.errors import StoreError
from store.migrations import Migration
from store.sqlite import open_sqlite, translate_error

__all__ = [
    "MAX_LABEL_CHARS",
    "REGISTRY_MIGRATIONS",
    "NotRegistered",
    "RegisteredPubkey",
    "RegistryError",
    "RegistrySnapshot",
    "RegistryStore",
]

MAX_LABEL_CHARS: Final = 200
_PROGRAM: Final = "codedeck-relaypolicy"
_LOSS: Final = "every registration in it will be lost (register the bridge and phones again)"
_HEX64: Final = re.compile(r"[0-9a-f]{64}")

REGISTRY_MIGRATIONS: Final = (
    Migration(
        1,
        "registered pubkeys and pairing windows",
        f"""
        CREATE TABLE registered_pubkeys (
            pubkey TEXT PRIMARY KEY NOT NULL
                CHECK (length(pubkey) = 64 AND pubkey NOT GLOB '*[^0-9a-f]*'),
            label TEXT NOT NULL DEFAULT '' CHECK (length(label) <= {MAX_LABEL_CHARS}),
            registered_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE pairing_windows (
            pubkey TEXT PRIMARY KEY NOT NULL
                REFERENCES registered_pubkeys (pubkey) ON DELETE CASCADE,
            until INTEGER NOT NULL
        ) WITHOUT ROWID;
        """,
    ),
)


class RegistryError(StoreError):
    """A registry operation was given something it cannot store (the message says what)."""


class NotRegistered(RegistryError):
    """The operation needs a registered pubkey, and this one is not."""


@dataclass(frozen=True, slots=True)
class RegisteredPubkey:
    """One row of the registry."""

    pubkey: str
    label: str
    registered_at: int
    pairing_until: int | None = None


@dataclass(frozen=True, slots=True)
class RegistrySnapshot:
    """Everything the policy needs, read in one transaction."""

    pubkeys: frozenset[str]
    windows: dict[str, int]


def _check_pubkey(pubkey: str) -> str:
    if not isinstance(pubkey, str) or not _HEX64.fullmatch(pubkey):
        raise RegistryError("a pubkey must be 64 lowercase hex characters")
    return pubkey


def _check_label(label: str) -> str:
    if not isinstance(label, str):
        raise RegistryError("a label must be a string")
    label = label.strip()
    if len(label) > MAX_LABEL_CHARS:
        raise RegistryError(f"a label is at most {MAX_LABEL_CHARS} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in label):
        raise RegistryError("a label must not contain control characters")
    return label


class RegistryStore:
    """A connection to the registry database (synchronous; one thread at a time).

    Open it with :meth:`open`; every method raises :class:`~store.errors.StoreError` subclasses
    with a message that names the file and the fix.
    """

    __slots__ = ("_conn", "path")

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    def open(cls, path: str | Path, *, check_same_thread: bool = True) -> RegistryStore:
        """Open (creating and migrating if needed) the registry at ``path``.

        The folder must exist. The file is created with mode 0600.
        """
        path = Path(path)
        conn = open_sqlite(
            path,
            REGISTRY_MIGRATIONS,
            program=_PROGRAM,
            loss_note=_LOSS,
            check_same_thread=check_same_thread,
        )
        return cls(conn, path)

    def __repr__(self) -> str:
        return f"RegistryStore({str(self.path)!r})"

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> RegistryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _fail(self, exc: sqlite3.Error) -> StoreError:
        return translate_error(exc, self.path, loss_note=_LOSS)

    # --- writes ---------------------------------------------------------------------------------

    def register(self, pubkey: str, *, label: str = "", now: int) -> bool:
        """Register ``pubkey``; True if it was new, False if it already was (label unchanged)."""
        pubkey, label = _check_pubkey(pubkey), _check_label(label)
        try:
            cursor = self._conn.execute(
                "INSERT INTO registered_pubkeys (pubkey, label, registered_at) VALUES (?, ?, ?) "
                "ON CONFLICT (pubkey) DO NOTHING",
                (pubkey, label, int(now)),
            )
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
        return cursor.rowcount == 1

    def unregister(self, pubkey: str) -> bool:
        """Remove ``pubkey`` and its pairing window; True if it was registered."""
        pubkey = _check_pubkey(pubkey)
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute("DELETE FROM pairing_windows WHERE pubkey = ?", (pubkey,))
                cursor = self._conn.execute(
                    "DELETE FROM registered_pubkeys WHERE pubkey = ?", (pubkey,)
                )
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
        return cursor.rowcount == 1

    def set_pairing_window(self, pubkey: str, until: int, *, now: int) -> bool:
        """Open ``pubkey``'s pairing window until ``until``, or close it when ``until <= now``.

        Windows that ended before ``now`` are pruned on the way.

        Returns:
            True when a window is now open, False when it was closed.

        Raises:
            NotRegistered: ``pubkey`` is not registered.
        """
        pubkey = _check_pubkey(pubkey)
        until, now = int(until), int(now)
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                registered = self._conn.execute(
                    "SELECT 1 FROM registered_pubkeys WHERE pubkey = ?", (pubkey,)
                ).fetchone()
                if registered is None:
                    raise NotRegistered("the bridge pubkey is not registered; register it first")
                self._conn.execute("DELETE FROM pairing_windows WHERE until <= ?", (now,))
                if until > now:
                    self._conn.execute(
                        "INSERT INTO pairing_windows (pubkey, until) VALUES (?, ?) "
                        "ON CONFLICT (pubkey) DO UPDATE SET until = excluded.until",
                        (pubkey, until),
                    )
                else:
                    self._conn.execute("DELETE FROM pairing_windows WHERE pubkey = ?", (pubkey,))
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
        return until > now

    # --- reads ----------------------------------------------------------------------------------

    def is_registered(self, pubkey: str) -> bool:
        """True when ``pubkey`` is registered."""
        try:
            row = self._conn.execute(
                "SELECT 1 FROM registered_pubkeys WHERE pubkey = ?", (pubkey,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
        return row is not None

    def registrations(self) -> list[RegisteredPubkey]:
        """Every registration, oldest first, with its pairing window end if one is recorded."""
        try:
            rows = self._conn.execute(
                "SELECT r.pubkey, r.label, r.registered_at, w.until FROM registered_pubkeys r "
                "LEFT JOIN pairing_windows w ON w.pubkey = r.pubkey "
                "ORDER BY r.registered_at, r.pubkey"
            ).fetchall()
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
        return [RegisteredPubkey(str(p), str(lb), int(at), w) for p, lb, at, w in rows]

    def count(self) -> int:
        """How many pubkeys are registered (also a cheap "is the database readable" probe)."""
        try:
            return int(self._conn.execute("SELECT count(*) FROM registered_pubkeys").fetchone()[0])
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc

    def snapshot(self) -> RegistrySnapshot:
        """All pubkeys and windows, read in one transaction (a consistent pair)."""
        try:
            self._conn.execute("BEGIN")
            try:
                pubkeys = frozenset(
                    row[0] for row in self._conn.execute("SELECT pubkey FROM registered_pubkeys")
                )
                windows = {
                    str(pk): int(until)
                    for pk, until in self._conn.execute("SELECT pubkey, until FROM pairing_windows")
                }
            finally:
                self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
        return RegistrySnapshot(pubkeys, windows)

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes whenever *another* connection commits.

        Reading it costs a few microseconds, so the plugin checks it before every decision and
        reloads its snapshot only when it moved.
        """
        try:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
