"""`bridge.control` re-exports exactly the union of its modules' `__all__`."""

from __future__ import annotations

import importlib

import bridge.control

# The socket's own modules; `task_methods` is the editor's contract, imported by name.
MODULES = ["client", "connection", "framing", "hosts", "methods", "rpc", "server", "terminal_text"]


def test_package_exports_the_union_of_module_exports() -> None:
    union: set[str] = set()
    for name in MODULES:
        module = importlib.import_module(f"bridge.control.{name}")
        exported = set(module.__all__)
        assert exported <= set(dir(module)), name
        union |= exported
    assert set(bridge.control.__all__) == union
    assert len(bridge.control.__all__) == len(set(bridge.control.__all__))
