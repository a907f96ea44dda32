"""The registry database: registrations, pairing windows, snapshots, change detection."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.errors import CorruptDatabase, SchemaMismatch, StoreError
from store.registry import (
    MAX_LABEL_CHARS,
    NotRegistered,
    RegisteredPubkey,
    RegistryError,
    RegistrySnapshot,
    RegistryStore,
)

A = "a" * 64
B = "b" * 64
C = "c" * 64


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RegistryStore]:
    with RegistryStore.open(tmp_path / "registry.db") as opened:
        yield opened


def test_new_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    RegistryStore.open(path).close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_register_is_idempotent(store: RegistryStore) -> None:
    assert store.register(A, label=" laptop ", now=100) is True
    assert store.register(A, label="other", now=200) is False
    assert store.is_registered(A)
    assert not store.is_registered(B)
    assert store.registrations() == [RegisteredPubkey(A, "laptop", 100, None)]
    assert store.count() == 1


def test_unregister(store: RegistryStore) -> None:
    store.register(A, now=1)
    assert store.unregister(A) is True
    assert store.unregister(A) is False
    assert store.registrations() == []


@pytest.mark.parametrize("bad", ["A" * 64, "a" * 63, "g" * 64, "", 5])
def test_pubkeys_are_validated(store: RegistryStore, bad: object) -> None:
    with pytest.raises(RegistryError, match="64 lowercase hex"):
        store.register(bad, now=1)  # type: ignore[arg-type]
    with pytest.raises(RegistryError):
        store.unregister(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ("x" * (MAX_LABEL_CHARS + 1), "at most"),
        ("bad\nlabel", "control characters"),
        (7, "must be a string"),
    ],
)
def test_labels_are_validated(store: RegistryStore, label: object, message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        store.register(A, label=label, now=1)  # type: ignore[arg-type]


def test_database_constraints_back_the_checks(store: RegistryStore, tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "registry.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO registered_pubkeys VALUES (?, '', 1)", ("Z" * 64,))
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO pairing_windows VALUES (?, 5)", (A,))
    conn.close()


def test_pairing_windows(store: RegistryStore) -> None:
    store.register(A, now=1)
    store.register(B, now=2)
    with pytest.raises(NotRegistered, match="register it first"):
        store.set_pairing_window(C, 500, now=100)
    assert store.set_pairing_window(A, 500, now=100) is True
    assert store.set_pairing_window(B, 150, now=100) is True
    assert store.snapshot() == RegistrySnapshot(frozenset({A, B}), {A: 500, B: 150})
    assert store.set_pairing_window(A, 700, now=100) is True  # moved
    # A window ending at or before now closes it; ended windows are pruned.
    assert store.set_pairing_window(A, 200, now=200) is False
    assert store.snapshot().windows == {}
    assert [row.pairing_until for row in store.registrations()] == [None, None]


def test_unregister_removes_the_window(store: RegistryStore) -> None:
    store.register(A, now=1)
    store.set_pairing_window(A, 500, now=100)
    store.unregister(A)
    store.register(A, now=3)
    assert store.snapshot().windows == {}


def test_listing_shows_windows(store: RegistryStore) -> None:
    store.register(B, label="phone", now=5)
    store.register(A, label="bridge", now=5)
    store.register(C, now=1)
    store.set_pairing_window(A, 900, now=100)
    assert store.registrations() == [
        RegisteredPubkey(C, "", 1, None),
        RegisteredPubkey(A, "bridge", 5, 900),
        RegisteredPubkey(B, "phone", 5, None),
    ]


def test_data_version_moves_only_for_other_connections(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    reader = RegistryStore.open(path)
    writer = RegistryStore.open(path)
    try:
        before = reader.data_version()
        assert reader.data_version() == before
        own = writer.data_version()
        writer.register(A, now=1)
        assert writer.data_version() == own  # its own commits do not count
        after = reader.data_version()
        assert after != before
        assert reader.snapshot().pubkeys == frozenset({A})
        assert reader.data_version() == after
    finally:
        reader.close()
        writer.close()


def test_not_a_registry(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaMismatch, match="codedeck-relaypolicy"):
        RegistryStore.open(other)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not sqlite at all" * 20)
    with pytest.raises(CorruptDatabase, match="register the bridge and phones again"):
        RegistryStore.open(garbage)


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        RegistryStore.open(tmp_path / "missing" / "registry.db")


def test_repr_and_close(tmp_path: Path) -> None:
    store = RegistryStore.open(tmp_path / "r.db")
    assert repr(store) == f"RegistryStore({str(tmp_path / 'r.db')!r})"
    store.close()
    store.close()
