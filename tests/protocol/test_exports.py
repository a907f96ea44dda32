"""Every module of bridge.protocol declares ``__all__``, and the package re-exports them."""

from __future__ import annotations

import importlib
import pkgutil

import bridge.protocol as protocol

MODULES = sorted(
    info.name for info in pkgutil.iter_modules(protocol.__path__) if not info.name.startswith("_")
)
# Building blocks the package deliberately leaves in their module (field types of the models).
NOT_REEXPORTED = {
    "primitives": {
        "Bool",
        "Int",
        "JsonObject",
        "NonEmptyStr",
        "NonNegativeInt",
        "Number",
        "Opt",
        "Percentage",
        "PositiveInt",
        "Str",
        "TriStateNonEmptyStr",
        "TriStateStr",
        "WIRE_CONTEXT",
        "PARSED_CONTEXT",
        "SHALLOW_CONTEXT",
    },
    # Range arithmetic has generic names (union, size, …): it is used as `protocol.ranges`.
    "ranges": {"chunk_ranges", "covers", "missing", "normalize", "size", "subtract", "union"},
}


def test_every_module_has_a_complete_all() -> None:
    for name in MODULES:
        module = importlib.import_module(f"bridge.protocol.{name}")
        assert hasattr(module, "__all__"), name
        for exported in module.__all__:
            assert hasattr(module, exported), f"{name}.{exported}"


def test_the_package_reexports_every_module() -> None:
    for name in MODULES:
        module = importlib.import_module(f"bridge.protocol.{name}")
        for exported in module.__all__:
            if exported in NOT_REEXPORTED.get(name, set()):
                continue
            assert exported in protocol.__all__, f"{name}.{exported} is not re-exported"
            assert getattr(protocol, exported) is getattr(module, exported)
    for exported in protocol.__all__:
        assert hasattr(protocol, exported)
