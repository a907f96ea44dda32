"""Module hygiene: ``__all__`` everywhere, and the pure core imports no I/O."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import relaypolicy
import relaypolicy.policies

ROOT = Path(relaypolicy.__file__).parent
MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages([str(ROOT)], prefix="relaypolicy.")
    if name != "relaypolicy.__main__"
)
PURE = [
    "relaypolicy.kinds",
    "relaypolicy.message",
    "relaypolicy.ratelimit",
    "relaypolicy.registry",
    "relaypolicy.pipeline",
    *[m for m in MODULES if m.startswith("relaypolicy.policies")],
]
FORBIDDEN = {
    "asyncio",
    "time",
    "random",
    "secrets",
    "logging",
    "os",
    "socket",
    "sqlite3",
    "aiohttp",
    "websockets",
    "aiosqlite",
    "store",
    "subprocess",
    "threading",
}


@pytest.mark.parametrize("name", MODULES)
def test_every_module_declares_its_exports(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(exported) == len(set(exported))
    for item in exported:
        assert hasattr(module, item), f"{name}.__all__ names missing {item}"


def test_policies_package_re_exports_every_policy() -> None:
    for name in MODULES:
        if name.startswith("relaypolicy.policies."):
            module = importlib.import_module(name)
            assert set(module.__all__) <= set(relaypolicy.policies.__all__), name


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_no_io(name: str) -> None:
    path = ROOT.joinpath(*name.split(".")[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots = {(node.module or "").split(".")[0]}
        else:
            continue
        assert not roots & FORBIDDEN, f"{name} imports {roots & FORBIDDEN}"
