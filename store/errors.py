"""The store's exceptions: one root, one subclass per thing the user must do differently.

Every message names the file involved and the fix, because the person reading it is usually at a
terminal after `codedeck-bridge run` refused to start: "database error" would send them to a
search engine, "move ~/.codedeck/bridge.db aside" does not. No message ever contains key material
or a stored value; keys of the key/value table and SQLite's own error text are fine (SQLite's
messages never echo bound parameters).

`StoreError` is deliberately not a subclass of the bridge's `BridgeError`: `store` is also used by
`relaypolicy`, and a store that imported `bridge` would point a dependency arrow the wrong way.
Callers that want one root catch both.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AlreadyRunning",
    "CorruptDatabase",
    "DatabaseBusy",
    "DatabaseUnreadable",
    "IdentityConflict",
    "InsecureHome",
    "MigrationFailed",
    "SchemaMismatch",
    "SchemaTooNew",
    "StoreError",
]


class StoreError(Exception):
    """Root of every error the store raises on purpose.

    Attributes:
        path: the file or directory the error is about, when there is one.
    """

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class InsecureHome(StoreError):
    """The home directory cannot be made private (mode 0700, owned by us) or is not a directory."""


class DatabaseUnreadable(StoreError):
    """The database file cannot be opened or written: permissions, a missing folder, a directory."""


class DatabaseBusy(StoreError):
    """Another connection held a write lock for longer than the busy timeout."""


class CorruptDatabase(StoreError):
    """The file is not a valid SQLite database, or SQLite found damage in it.

    Raised before anything is written to the file: the store never "repairs" a database by
    starting over, since that would silently replace the bridge identity.
    """


class SchemaTooNew(StoreError):
    """The database was migrated by a newer build than this one.

    Attributes:
        found: the highest schema version recorded in the file.
        known: the highest version this build knows.
    """

    def __init__(self, message: str, *, path: Path, found: int, known: int) -> None:
        super().__init__(message, path=path)
        self.found = found
        self.known = known


class SchemaMismatch(StoreError):
    """The file is a SQLite database, but not one of ours (or from a diverged build)."""


class MigrationFailed(StoreError):
    """A migration raised; its transaction was rolled back and the file keeps the previous version.

    Attributes:
        version: the migration that failed.
    """

    def __init__(self, message: str, *, path: Path, version: int) -> None:
        super().__init__(message, path=path)
        self.version = version


class IdentityConflict(StoreError):
    """`save_identity` was asked to replace an existing, different bridge identity."""


class AlreadyRunning(StoreError):
    """Another process holds the home's lock.

    Attributes:
        pid: the holder's pid as it wrote it into the lock file, or None if unknown.
    """

    def __init__(self, message: str, *, path: Path, pid: int | None) -> None:
        super().__init__(message, path=path)
        self.pid = pid
