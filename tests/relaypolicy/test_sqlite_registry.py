"""The plugin's registry: the database mirrored in memory, refreshed on change, failing closed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relaypolicy.sqlite_registry import SqliteRegistry
from store.errors import StoreError
from store.registry import RegistryStore

A = "a" * 64
B = "b" * 64


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_refresh_sees_other_writers(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    registry = SqliteRegistry(path)
    assert registry.refresh() is True  # first load (creates the file)
    assert registry.refresh() is False  # nothing changed: no reload
    assert not registry.is_registered(A)
    with RegistryStore.open(path) as writer:
        writer.register(A, now=1)
        writer.register(B, now=1)
        writer.set_pairing_window(B, 500, now=100)
        assert registry.refresh() is True
        assert registry.is_registered(A) and registry.is_registered(B)
        assert registry.pairing_window_until(B) == 500
        assert registry.pairing_window_until(A) is None
        assert len(registry) == 2
        writer.unregister(A)
    assert registry.refresh() is True
    assert not registry.is_registered(A)
    assert registry.refresh() is False
    assert repr(registry) == f"SqliteRegistry({str(path)!r}, 1 pubkeys)"
    registry.close()
    registry.close()


def test_unreadable_registry_fails_closed_and_recovers(tmp_path: Path) -> None:
    folder = tmp_path / "missing"
    clock = FakeClock()
    registry = SqliteRegistry(folder / "registry.db", clock=clock)
    with pytest.raises(StoreError):
        registry.refresh()
    # Within the re-open interval the same error comes back without touching the disk.
    folder.mkdir()
    clock.now = 0.5
    with pytest.raises(StoreError):
        registry.refresh()
    clock.now = 1.5
    assert registry.refresh() is True
    registry.close()


def test_a_file_that_breaks_later_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    with RegistryStore.open(path) as writer:
        writer.register(A, now=1)
    clock = FakeClock()
    registry = SqliteRegistry(path, clock=clock)
    assert registry.refresh()
    registry.close()  # simulate the connection going away
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")
    path.write_bytes(b"garbage" * 100)
    with pytest.raises(StoreError):
        registry.refresh()
