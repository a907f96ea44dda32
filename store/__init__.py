"""Persistence for codedeck-bridge: the bridge home, its SQLite database, and the home lock.

Layout of the package (dependencies point down the list):

- `errors`: `StoreError` and its subclasses, each message naming the file and the fix;
- `home`: the home directory (0700) and private files (0600);
- `migrations`: the versioned-migration runner, synchronous, reusable by any database;
- `sqlite`: `open_sqlite()`, the one way a database file is opened (checks, WAL, migrations);
- `schema`: the bridge database's migrations;
- `worker`: the connection's own thread (a job is one trip, however many statements);
- `db`: `BridgeDatabase`, the asyncio handle on `<home>/bridge.db`, with transactions;
- `kv`, `identity`: repositories over the bridge database;
- `lock`: the one-daemon-per-home OS lock.

Only the runtime (and the CLI's offline commands) use this package; the sans-I/O engine never
does. `relaypolicy` builds its own registry database on `open_sqlite` and `Migration`.

A daemon start, in order::

    home = ensure_home(settings.home)       # 0700, or InsecureHome
    lock = acquire_lock(home)               # AlreadyRunning names the other pid
    db = await open_bridge_db(home)         # CorruptDatabase, SchemaTooNew, ... never a new key
    secret = await load_identity(db)        # None on first run: generate, then save_identity
    ...
    await db.close(); lock.release()        # or let the process exit: the lock goes with it

`status` reads `read_lock_holder(home)` without taking the lock.
"""

from store.db import BRIDGE_DB_FILENAME, BridgeDatabase, Params, Row, Statement, open_bridge_db
from store.errors import (
    AlreadyRunning,
    CorruptDatabase,
    DatabaseBusy,
    DatabaseUnreadable,
    IdentityConflict,
    InsecureHome,
    MigrationFailed,
    SchemaMismatch,
    SchemaTooNew,
    StoreError,
)
from store.home import (
    DEFAULT_HOME,
    FILE_MODE,
    HOME_MODE,
    blocking_file,
    create_private_file,
    ensure_home,
    not_a_directory_message,
    read_only_reason,
    resolve_home,
    tighten_file_mode,
    unwritable_fix,
    unwritable_message,
)
from store.identity import SECRET_KEY_LENGTH, load_identity, save_identity
from store.kv import MAX_KEY_LENGTH, kv_delete, kv_get, kv_set, kv_set_statement
from store.lock import LOCK_FILENAME, BridgeLock, LockHolder, acquire_lock, read_lock_holder
from store.migrations import Migration, current_version, migrate, split_statements
from store.schema import BRIDGE_MIGRATIONS
from store.sqlite import (
    BUSY_TIMEOUT_MS,
    MIN_SQLITE_VERSION,
    SQLITE_HEADER,
    open_sqlite,
    translate_error,
)

__all__ = [
    "BRIDGE_DB_FILENAME",
    "BRIDGE_MIGRATIONS",
    "BUSY_TIMEOUT_MS",
    "DEFAULT_HOME",
    "FILE_MODE",
    "HOME_MODE",
    "LOCK_FILENAME",
    "MAX_KEY_LENGTH",
    "MIN_SQLITE_VERSION",
    "SECRET_KEY_LENGTH",
    "SQLITE_HEADER",
    "AlreadyRunning",
    "BridgeDatabase",
    "BridgeLock",
    "CorruptDatabase",
    "DatabaseBusy",
    "DatabaseUnreadable",
    "IdentityConflict",
    "InsecureHome",
    "LockHolder",
    "Migration",
    "MigrationFailed",
    "Params",
    "Row",
    "SchemaMismatch",
    "SchemaTooNew",
    "Statement",
    "StoreError",
    "acquire_lock",
    "blocking_file",
    "create_private_file",
    "current_version",
    "ensure_home",
    "kv_delete",
    "kv_get",
    "kv_set",
    "kv_set_statement",
    "load_identity",
    "migrate",
    "not_a_directory_message",
    "open_bridge_db",
    "open_sqlite",
    "read_lock_holder",
    "read_only_reason",
    "resolve_home",
    "save_identity",
    "split_statements",
    "tighten_file_mode",
    "translate_error",
    "unwritable_fix",
    "unwritable_message",
]
