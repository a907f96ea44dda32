"""The architecture's rules, checked: sans-I/O modules import no I/O, dependencies point one way,
every module declares ``__all__`` and the packages re-export their modules' names."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Modules that must stay pure: no clock, randomness, logging, sockets or event loop.
PURE_DIRS = [
    "bridge/protocol",
    "bridge/engine",
    "bridge/gate",
    "bridge/nostr",
    "bridge/relay",
    "relaypolicy/policies",
]
IO_MODULES_ALLOWED = {
    "bridge/nostr/relay.py",  # the Nostr I/O layer
    "bridge/nostr/pool.py",
    "bridge/relay/storage.py",  # the embedded relay's I/O
    "bridge/relay/server.py",
    "bridge/relay/local.py",  # the daemon's in-process link to it
}
FORBIDDEN = {
    "asyncio",
    "websockets",
    "aiosqlite",
    "aiohttp",
    "socket",
    "time",
    "random",
    "secrets",
    "logging",
    "subprocess",
    "sqlite3",
}

# Dependencies point one way: every package of the project sits on a layer and imports only
# from lower layers (and itself). Read bottom-up, this is the house: the shared vocabulary, the
# pure cores, the session host and the agent drivers, the control socket, the daemon's runtime,
# and the front ends (the editor's orchestrator, doctor, the service, the CLI).
LAYERS: list[set[str]] = [
    {
        "bridge",
        "bridge.records",
        "bridge.tasks",
        "bridge.redaction",
        "bridge.peercred",
        "bridge.ripgrep",
        "bridge.webclient",  # the built web app's files and their loader
        "bridge.config_values",  # the parsers of setting values (bridge.config's table uses them)
    },
    {"bridge.protocol", "bridge.sandbox", "bridge.agent_config"},
    {
        "bridge.nostr",
        "bridge.gate",
        "bridge.config",
        "bridge.agent_reports",
    },
    {"bridge.engine", "bridge.relay", "bridge.host", "bridge.logs", "bridge.push", "store"},
    {"bridge.agents", "relaypolicy"},
    {"bridge.control"},
    {"bridge.runtime"},
    {"bridge.desiide", "bridge.service"},
    {"bridge.doctor"},
    {"bridge.cli"},
    {"bridge.__main__"},
]
LAYER_OF = {package: level for level, packages in enumerate(LAYERS) for package in packages}


def package_of(module: str) -> str | None:
    """The layered package a module belongs to (``bridge.runtime.hosts.link`` → ``bridge.runtime``)."""
    parts = module.split(".")
    if parts[0] in ("store", "relaypolicy"):
        return parts[0]
    if parts[0] != "bridge":
        return None
    return ".".join(parts[:2]) if len(parts) > 1 else "bridge"


# Narrower rules inside a layer: packages that must not reach what their layer would allow.
LAYER_RULES = {
    "bridge/protocol": {"bridge", "store", "relaypolicy"},  # imports nothing of the project
    "bridge/nostr": {"bridge.protocol", "bridge.sandbox", "bridge.agent_config"},
    # The relay knows Nostr and nothing of the bridge: its write policy is a callback.
    "bridge/relay": {"bridge.protocol", "bridge.engine", "bridge.gate"},
    # The sandbox is planned by the daemon and applied by a session host: it knows neither.
    "bridge/sandbox": {"bridge.protocol", "bridge.agent_config"},
    # The gate is one model for the engine, the agent drivers and the editor: it knows none.
    "bridge/gate": {"bridge.protocol", "bridge.nostr", "bridge.config", "bridge.agent_config"},
    # A session host outlives the daemon and must stay lean: none of the daemon's stack.
    "bridge/host": {"bridge.engine", "bridge.nostr", "bridge.gate", "bridge.protocol", "store"},
    # The editor's orchestrator drives the daemon through the control socket; it never reaches
    # into a host, an agent or a relay.
    "bridge/desiide": {"bridge.host", "bridge.agents", "bridge.relay", "bridge.nostr"},
}
# What a session host runs must stay lean (RSS, start time): its package and the drivers.
LEAN_FILES = [
    *sorted((REPO / "bridge/host").rglob("*.py")),
    *sorted((REPO / "bridge/agents/claude").rglob("*.py")),
    *sorted((REPO / "bridge/agents").glob("scripted*.py")),
    REPO / "bridge/agents/tool_render.py",
    REPO / "bridge/agents/input_log.py",
    REPO / "bridge/agents/child_process.py",
    *sorted((REPO / "bridge/sandbox").rglob("*.py")),
    *sorted((REPO / "bridge/agents/workspace_tools").rglob("*.py")),
    REPO / "bridge/ripgrep.py",
]
LEAN_FORBIDDEN = {
    "pydantic",
    "claude_agent_sdk",
    "websockets",
    "aiosqlite",
    "bridge.protocol",
    "bridge.engine",
    "bridge.gate",
    "bridge.runtime",
    "bridge.nostr",
    "bridge.control",
    "bridge.cli",
    "bridge.agents.base",
    "store",
    "relaypolicy",
}
ALLOWED_EXCEPTIONS = {
    "bridge/protocol": {"bridge.protocol"},
    "bridge/nostr": {"bridge.protocol.kinds", "bridge.tasks"},
}


def python_files(directory: str) -> list[Path]:
    return sorted((REPO / directory).rglob("*.py"))


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def uses_os_environ(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.Attribute)
        and node.attr in ("environ", "getenv")
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
        for node in ast.walk(tree)
    )


PURE_FILES = [
    p
    for d in PURE_DIRS
    for p in python_files(d)
    if str(p.relative_to(REPO)) not in IO_MODULES_ALLOWED
]


@pytest.mark.parametrize("path", PURE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_pure_modules_import_no_io(path: Path) -> None:
    bad = sorted({m for m in imported_modules(path) if m.split(".")[0] in FORBIDDEN})
    assert bad == [], f"{path.relative_to(REPO)} imports {bad}"
    assert not uses_os_environ(path), f"{path.relative_to(REPO)} reads the environment"


PROJECT_MODULES = [p for d in ("bridge", "relaypolicy", "store") for p in python_files(d)]


def module_name_of(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def test_every_package_has_a_layer() -> None:
    packages = {package_of(module_name_of(p)) for p in PROJECT_MODULES}
    assert packages - set(LAYER_OF) == set(), "give each new package a layer in LAYERS"


@pytest.mark.parametrize("path", PROJECT_MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_imports_point_down(path: Path) -> None:
    own = package_of(module_name_of(path))
    assert own is not None
    for module in imported_modules(path):
        other = package_of(module)
        if other is None or other == own or other not in LAYER_OF:
            continue
        assert LAYER_OF[other] < LAYER_OF[own], (
            f"{path.relative_to(REPO)} imports {module}: {other} is not below {own}"
        )


LAYERED = [(d, p) for d in LAYER_RULES for p in python_files(d)]


@pytest.mark.parametrize(
    ("layer", "path"), LAYERED, ids=lambda v: str(v.relative_to(REPO)) if isinstance(v, Path) else v
)
def test_dependencies_point_one_way(layer: str, path: Path) -> None:
    forbidden = LAYER_RULES[layer]
    allowed = ALLOWED_EXCEPTIONS.get(layer, set())
    for module in imported_modules(path):
        if any(module == a or module.startswith(a + ".") for a in allowed):
            continue
        hit = [f for f in forbidden if module == f or module.startswith(f + ".")]
        assert not hit, f"{path.relative_to(REPO)} imports {module} (layer {layer} must not)"


MAX_MODULES_PER_FOLDER = 20
FOLDERS = sorted({p.parent for p in PROJECT_MODULES})


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_folder_is_a_flat_pile(folder: Path) -> None:
    """A folder past twenty modules is a package that needs areas (subfolders by job)."""
    modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES_PER_FOLDER, (
        f"{folder.relative_to(REPO)} holds {len(modules)} modules: split it into areas"
    )


@pytest.mark.parametrize("path", LEAN_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_what_a_session_host_runs_imports_nothing_heavy(path: Path) -> None:
    for module in imported_modules(path):
        hit = [f for f in LEAN_FORBIDDEN if module == f or module.startswith(f + ".")]
        assert not hit, f"{path.relative_to(REPO)} imports {module}: a session host must stay lean"


ALL_MODULES = [
    p
    for d in ("bridge", "relaypolicy", "store")
    for p in python_files(d)
    if p.name != "__main__.py"
]


@pytest.mark.parametrize("path", ALL_MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_module_declares_all(path: Path) -> None:
    module_name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
    module = importlib.import_module(module_name)
    assert hasattr(module, "__all__"), f"{module_name} has no __all__"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == [], f"{module_name}.__all__ names missing objects: {missing}"


@pytest.mark.parametrize(
    ("package", "modules"),
    [
        ("bridge.nostr", ["keys", "event", "nip44", "messages", "filters", "backoff", "nip42"]),
    ],
)
def test_package_reexports_its_pure_modules(package: str, modules: list[str]) -> None:
    exported = set(importlib.import_module(package).__all__)
    union = set()
    for name in modules:
        union |= set(importlib.import_module(f"{package}.{name}").__all__)
    assert exported == union
