"""The registry the strfry plugin uses: the registry database, mirrored in memory.

Decisions must be fast (thousands per second at 10,000 registered pubkeys), so they read an
in-memory :class:`~relaypolicy.registry.MemoryRegistry`. :meth:`SqliteRegistry.refresh`, called
by the plugin loop before each decision, keeps it current: it reads ``PRAGMA data_version`` (a few
microseconds) and reloads the whole snapshot only when another process (the admin API, the
``register`` command) committed since the last look. So a registration is in force for the very
next event, without restarting the plugin.

The version is read *before* the snapshot: a write that lands in between makes the next refresh
reload again, never the other way round (a stale snapshot mistaken for a fresh one).

This is the I/O side; the rules see only the :class:`~relaypolicy.registry.PubkeyRegistry` interface.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from relaypolicy.registry import MemoryRegistry
from store.errors import StoreError
from store.registry import RegistryStore

__all__ = ["SqliteRegistry"]

#: After a failed open, wait this long before trying again (each event would otherwise retry).
_REOPEN_INTERVAL: Final = 1.0


class SqliteRegistry:
    """A :class:`~relaypolicy.registry.PubkeyRegistry` backed by the registry database.

    The database is opened lazily by the first :meth:`refresh`, and re-opened after an error, at
    most once per second; in between, :meth:`refresh` raises the last error again so the caller
    rejects the event (fail closed).

    Args:
        path: the registry database (created if missing; its folder must exist).
        clock: monotonic seconds, for the re-open interval.
    """

    __slots__ = ("_clock", "_failed_at", "_last_error", "_memory", "_store", "_version", "path")

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        self._store: RegistryStore | None = None
        self._memory = MemoryRegistry()
        self._version: int | None = None
        self._failed_at: float | None = None
        self._last_error: StoreError | None = None

    def __repr__(self) -> str:
        return f"SqliteRegistry({str(self.path)!r}, {len(self._memory)} pubkeys)"

    def __len__(self) -> int:
        return len(self._memory)

    def is_registered(self, pubkey: str) -> bool:
        """See :meth:`relaypolicy.registry.PubkeyRegistry.is_registered`."""
        return self._memory.is_registered(pubkey)

    def pairing_window_until(self, pubkey: str) -> int | None:
        """See :meth:`relaypolicy.registry.PubkeyRegistry.pairing_window_until`."""
        return self._memory.pairing_window_until(pubkey)

    def refresh(self) -> bool:
        """Pick up changes made by other processes.

        Returns:
            True when the in-memory copy was reloaded.

        Raises:
            StoreError: the database cannot be opened or read (the in-memory copy is then not
                trusted: the next successful refresh reloads it).
        """
        store = self._open()
        try:
            version = store.data_version()
            if version == self._version:
                return False
            snapshot = store.snapshot()
        except StoreError as exc:
            self._drop(exc)
            raise
        self._memory.replace(snapshot.pubkeys, snapshot.windows)
        self._version = version
        return True

    def _open(self) -> RegistryStore:
        if self._store is not None:
            return self._store
        if (
            self._failed_at is not None
            and self._last_error is not None
            and self._clock() - self._failed_at < _REOPEN_INTERVAL
        ):
            raise self._last_error
        try:
            self._store = RegistryStore.open(self.path)
        except StoreError as exc:
            self._drop(exc)
            raise
        self._failed_at = self._last_error = None
        self._version = None
        return self._store

    def _drop(self, exc: StoreError) -> None:
        if self._store is not None:
            self._store.close()
        self._store = None
        self._version = None
        self._failed_at = self._clock()
        self._last_error = exc

    def close(self) -> None:
        """Close the database connection (idempotent)."""
        if self._store is not None:
            self._store.close()
            self._store = None
