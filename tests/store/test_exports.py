"""`store` re-exports exactly the union of its modules' `__all__` (the registry is not ours)."""

from __future__ import annotations

import importlib

import store

MODULES = ["db", "errors", "home", "identity", "kv", "lock", "migrations", "schema", "sqlite"]


def test_package_exports_the_union_of_module_exports() -> None:
    union: set[str] = set()
    for name in MODULES:
        module = importlib.import_module(f"store.{name}")
        exported = set(module.__all__)
        assert exported <= set(dir(module)), name
        union |= exported
    assert set(store.__all__) == union
    assert len(store.__all__) == len(set(store.__all__))
    for name in store.__all__:
        assert getattr(store, name) is not None
