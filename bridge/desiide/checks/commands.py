"""The project's test and lint commands, for a task's success checks.

COR-2: ``verifying`` "runs the project's test and lint commands when ``success.testsPass`` /
``lintClean`` asks (found from the project: Makefile, package.json scripts, pyproject;
``no_check_command`` when there is none)". Where we look, first hit wins for each check:

1. **Makefile** (``GNUmakefile``, ``Makefile``, ``makefile``): targets ``test`` and ``lint``,
   ``check`` standing in for either. The project's own entry point knows its environment and
   flags better than any guess, so it goes first.
2. **package.json** scripts ``test`` (not npm's placeholder ``echo "Error: no test specified" &&
   exit 1``, which always fails) and ``lint``, run with the package manager its lockfile names
   (``pnpm``, ``yarn``, ``bun``, else ``npm``).
3. **Python**: a pytest configuration (``[tool.pytest.ini_options]`` or ``[tool.pytest]`` in
   ``pyproject.toml``, ``pytest.ini``, ``[tool:pytest]`` in ``setup.cfg``, ``[pytest]`` in
   ``tox.ini``) → ``python -m pytest -q``; a ruff one (``[tool.ruff]``, ``ruff.toml``,
   ``.ruff.toml``) → ``ruff check .``. The workspace's own virtualenv (``.venv``, ``venv``) is
   used when it has the program: the system ``python`` rarely has the project's dependencies.
4. **tox** (``[tox]`` in ``tox.ini``, ``[tool.tox]``) → ``tox``; **nox** (``noxfile.py``) → its
   ``tests``/``test`` and ``lint`` sessions.
5. **Cargo.toml** → ``cargo test``; **go.mod** → ``go test ./...`` and ``go vet ./...``.

Commands are argv lists, run from the workspace root (relative programs such as
``.venv/bin/python`` assume it). The parsers are pure functions of file contents;
:func:`find_checks` is the one function that reads the workspace.
"""

from __future__ import annotations

import configparser
import json
import re
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Final

from bridge.records import record

__all__ = [
    "CANDIDATE_FILES",
    "ProjectChecks",
    "check_commands",
    "detect",
    "find_checks",
    "from_cargo",
    "from_go_mod",
    "from_makefile",
    "from_noxfile",
    "from_package_json",
    "from_python",
    "makefile_targets",
    "package_runner",
]

Command = tuple[str, ...]

MAKEFILES: Final = ("GNUmakefile", "Makefile", "makefile")
LOCKFILES: Final = (
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("bun.lockb", "bun"),
    ("bun.lock", "bun"),
)
VENV_DIRS: Final = (".venv", "venv")
CANDIDATE_FILES: Final = (
    *MAKEFILES,
    "package.json",
    *(name for name, _ in LOCKFILES),
    "pyproject.toml",
    "pytest.ini",
    "setup.cfg",
    "tox.ini",
    "ruff.toml",
    ".ruff.toml",
    "noxfile.py",
    "Cargo.toml",
    "go.mod",
    *(f"{venv}/bin/{program}" for venv in VENV_DIRS for program in ("python", "ruff")),
)
"""Every workspace file the detection looks at (venv programs and lockfiles only exist)."""
_MARKERS: Final = frozenset(
    {name for name, _ in LOCKFILES}
    | {f"{venv}/bin/{program}" for venv in VENV_DIRS for program in ("python", "ruff")}
)
"""Files that only need to exist."""
MAX_FILE_BYTES: Final = 1024 * 1024
NPM_PLACEHOLDER: Final = "no test specified"


@record
class ProjectChecks:
    """The commands found for each check; None where the project has none."""

    test: Command | None = None
    lint: Command | None = None

    def or_else(self, other: ProjectChecks) -> ProjectChecks:
        """These commands, each missing one taken from `other`."""
        return ProjectChecks(self.test or other.test, self.lint or other.lint)


# --- Makefile --------------------------------------------------------------------------------

# A rule line: targets, then ":" or "::" not followed by "=" (":=", "::=" and ":::=" are
# assignments).
_RULE: Final = re.compile(r"^([^\s:=#][^:=#]*?)\s*::?(?![:=])")


def makefile_targets(text: str) -> frozenset[str]:
    """The explicit targets of a Makefile (recipes, variables and pattern rules left out)."""
    targets: set[str] = set()
    for line in text.splitlines():
        if line.startswith("\t") or (match := _RULE.match(line)) is None:
            continue
        targets.update(t for t in match.group(1).split() if "$" not in t and "%" not in t)
    return frozenset(targets)


def from_makefile(text: str) -> ProjectChecks:
    """``make test`` / ``make lint``; ``make check`` for whichever is missing."""
    targets = makefile_targets(text)
    check: Command | None = ("make", "check") if "check" in targets else None
    test: Command | None = ("make", "test") if "test" in targets else check
    lint: Command | None = ("make", "lint") if "lint" in targets else check
    return ProjectChecks(test, lint)


# --- package.json ----------------------------------------------------------------------------


def package_runner(present: Collection[str]) -> str:
    """The package manager a workspace uses, from the lockfiles `present` (npm by default)."""
    return next((runner for name, runner in LOCKFILES if name in present), "npm")


def from_package_json(text: str, runner: str = "npm") -> ProjectChecks:
    """The ``test`` and ``lint`` scripts, as ``<runner> run <script>`` (npm's "no test
    specified" placeholder is no test). Malformed JSON has none."""
    try:
        data = json.loads(text)
    except ValueError:
        return ProjectChecks()
    scripts = data.get("scripts") if isinstance(data, dict) else None
    if not isinstance(scripts, dict):
        return ProjectChecks()

    def script(name: str) -> Command | None:
        value = scripts.get(name)
        if not isinstance(value, str) or not value.strip() or NPM_PLACEHOLDER in value:
            return None
        return (runner, "run", name)

    return ProjectChecks(script("test"), script("lint"))


# --- Python ----------------------------------------------------------------------------------


def _toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeError):
        return {}


def _ini_sections(text: str) -> frozenset[str]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return frozenset()
    return frozenset(parser.sections())


def _table(data: Mapping[str, Any], *path: str) -> bool:
    """Whether `data` has the table at `path` (``("tool", "ruff")`` is ``[tool.ruff]``)."""
    node: Any = data
    for key in path:
        if not isinstance(node, Mapping) or not isinstance(node.get(key), Mapping):
            return False
        node = node[key]
    return True


def _program(files: Mapping[str, str], name: str) -> str:
    """The workspace venv's `name` when it has one, else `name` from PATH."""
    for venv in VENV_DIRS:
        if f"{venv}/bin/{name}" in files:
            return f"{venv}/bin/{name}"
    return name


def from_python(files: Mapping[str, str]) -> ProjectChecks:
    """pytest and ruff from their configuration files, then tox (see the module docstring).

    Args:
        files: workspace-relative name → text of the files that exist (venv programs with
            any text).
    """
    pyproject = _toml(files.get("pyproject.toml", ""))
    setup_cfg = _ini_sections(files["setup.cfg"]) if "setup.cfg" in files else frozenset()
    tox_ini = _ini_sections(files["tox.ini"]) if "tox.ini" in files else frozenset()
    pytest = (
        _table(pyproject, "tool", "pytest")
        or "pytest.ini" in files
        or "tool:pytest" in setup_cfg
        or "pytest" in tox_ini
    )
    ruff = _table(pyproject, "tool", "ruff") or "ruff.toml" in files or ".ruff.toml" in files
    test: Command | None = None
    if pytest:
        test = (_program(files, "python"), "-m", "pytest", "-q")
    elif "tox" in tox_ini or _table(pyproject, "tool", "tox"):
        test = ("tox",)
    lint: Command | None = (_program(files, "ruff"), "check", ".") if ruff else None
    return ProjectChecks(test, lint)


_NOX_SESSION: Final = re.compile(r"@nox\.session\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)\s*\(")


def from_noxfile(text: str) -> ProjectChecks:
    """``nox -s tests`` (or ``test``) and ``nox -s lint``, when the noxfile defines them."""
    sessions = set(_NOX_SESSION.findall(text))
    test = next((("nox", "-s", name) for name in ("tests", "test") if name in sessions), None)
    lint: Command | None = ("nox", "-s", "lint") if "lint" in sessions else None
    return ProjectChecks(test, lint)


# --- others ----------------------------------------------------------------------------------


def from_cargo(text: str) -> ProjectChecks:
    """``cargo test`` for a package or workspace manifest."""
    data = _toml(text)
    return ProjectChecks(("cargo", "test") if "package" in data or "workspace" in data else None)


def from_go_mod(text: str) -> ProjectChecks:
    """``go test ./...`` and ``go vet ./...`` for a module."""
    if not re.search(r"^module\s+\S", text, re.MULTILINE):
        return ProjectChecks()
    return ProjectChecks(("go", "test", "./..."), ("go", "vet", "./..."))


# --- putting it together ---------------------------------------------------------------------


def detect(files: Mapping[str, str]) -> ProjectChecks:
    """The project's checks from its files (pure; see the module docstring for the order).

    Args:
        files: workspace-relative name → text, for the :data:`CANDIDATE_FILES` that exist.
    """
    found = ProjectChecks()
    makefile = next((name for name in MAKEFILES if name in files), None)
    if makefile is not None:
        found = found.or_else(from_makefile(files[makefile]))
    if "package.json" in files:
        found = found.or_else(from_package_json(files["package.json"], package_runner(files)))
    found = found.or_else(from_python(files))
    if "noxfile.py" in files:
        found = found.or_else(from_noxfile(files["noxfile.py"]))
    if "Cargo.toml" in files:
        found = found.or_else(from_cargo(files["Cargo.toml"]))
    if "go.mod" in files:
        found = found.or_else(from_go_mod(files["go.mod"]))
    return found


def find_checks(root: Path) -> ProjectChecks:
    """Read the candidate files of the workspace at `root` and :func:`detect` its checks.

    A file that cannot be read, is not UTF-8 or is over 1 MiB counts as absent; the venv
    programs and lockfiles only need to exist.
    """
    files: dict[str, str] = {}
    for name in CANDIDATE_FILES:
        path = root / name
        try:
            if not path.is_file():
                continue
            if name in _MARKERS:
                files[name] = ""
            elif path.stat().st_size <= MAX_FILE_BYTES:
                files[name] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return detect(files)


def check_commands(checks: ProjectChecks, *, tests: bool, lint: bool) -> list[list[str]] | None:
    """The commands for the asked checks, in order (tests, then lint), each once.

    Returns:
        None when a check is asked for and the project has no command for it (the task fails
        ``no_check_command``: a lint-clean request cannot be met by running only the tests);
        an empty list when no check is asked for.
    """
    wanted = [command for asked, command in ((tests, checks.test), (lint, checks.lint)) if asked]
    if any(command is None for command in wanted):
        return None
    unique = dict.fromkeys(command for command in wanted if command is not None)
    return [list(command) for command in unique]
