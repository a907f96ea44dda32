"""Finding a project's test and lint commands (bridge.desiide.checks.commands): parsers, order, the reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.desiide.checks.commands import (
    ProjectChecks,
    check_commands,
    detect,
    find_checks,
    from_makefile,
    from_noxfile,
    from_package_json,
    makefile_targets,
    package_runner,
)

MAKEFILE = """\
.PHONY: test lint
PY := .venv/bin/python
SRC ::= bridge
all test: deps
\t$(PY) -m pytest
lint:
\truff check .
%.o: %.c
\tcc -c $<
$(BUILD)/x: y
build-docs : ; echo docs
"""


def test_makefile_targets_are_the_rules_not_assignments_or_recipes() -> None:
    assert makefile_targets(MAKEFILE) == {".PHONY", "all", "test", "lint", "build-docs"}


MAKEFILE_CASES = [
    ("test and lint", "test:\n\tx\nlint:\n\ty\n", ("make", "test"), ("make", "lint")),
    ("check only", "check:\n\tx\n", ("make", "check"), ("make", "check")),
    ("test and check", "test:\ncheck:\n", ("make", "test"), ("make", "check")),
    ("none", "build:\n\tx\nVAR = test:\n", None, None),
]


@pytest.mark.parametrize(
    ("text", "test", "lint"), [c[1:] for c in MAKEFILE_CASES], ids=[c[0] for c in MAKEFILE_CASES]
)
def test_makefile(text: str, test: tuple[str, ...] | None, lint: tuple[str, ...] | None) -> None:
    assert from_makefile(text) == ProjectChecks(test, lint)


NPM_DEFAULT = 'echo "Error: no test specified" && exit 1'
PACKAGE_CASES = [
    (
        "scripts",
        {"test": "vitest run", "lint": "eslint ."},
        ("npm", "run", "test"),
        ("npm", "run", "lint"),
    ),
    (
        "npm's placeholder is no test",
        {"test": NPM_DEFAULT, "lint": "eslint ."},
        None,
        ("npm", "run", "lint"),
    ),
    ("blank", {"test": "  ", "build": "tsc"}, None, None),
]


@pytest.mark.parametrize(
    ("scripts", "test", "lint"), [c[1:] for c in PACKAGE_CASES], ids=[c[0] for c in PACKAGE_CASES]
)
def test_package_json(
    scripts: dict[str, str], test: tuple[str, ...] | None, lint: tuple[str, ...] | None
) -> None:
    assert from_package_json(json.dumps({"scripts": scripts})) == ProjectChecks(test, lint)


@pytest.mark.parametrize("text", ["{", "[]", '{"scripts": []}', '{"name": "x"}'])
def test_package_json_without_usable_scripts_has_none(text: str) -> None:
    assert from_package_json(text) == ProjectChecks()


RUNNER_CASES = [
    ((), "npm"),
    (("package-lock.json",), "npm"),
    (("pnpm-lock.yaml",), "pnpm"),
    (("yarn.lock",), "yarn"),
    (("bun.lockb",), "bun"),
]


@pytest.mark.parametrize(
    ("present", "runner"), RUNNER_CASES, ids=["none", "npm", "pnpm", "yarn", "bun"]
)
def test_the_lockfile_names_the_package_manager(present: tuple[str, ...], runner: str) -> None:
    assert package_runner(present) == runner


PYTEST = ("python", "-m", "pytest", "-q")
RUFF = ("ruff", "check", ".")
DETECT_CASES = [
    (
        "pyproject pytest + ruff",
        {"pyproject.toml": "[tool.pytest.ini_options]\n[tool.ruff]\n"},
        PYTEST,
        RUFF,
    ),
    (
        "pytest 9 native table",
        {"pyproject.toml": "[tool.pytest]\nminversion = '9'\n"},
        PYTEST,
        None,
    ),
    ("pytest.ini", {"pytest.ini": "[pytest]\n"}, PYTEST, None),
    ("setup.cfg", {"setup.cfg": "[tool:pytest]\naddopts = -q\n"}, PYTEST, None),
    ("tox.ini pytest section", {"tox.ini": "[pytest]\n"}, PYTEST, None),
    ("tox", {"tox.ini": "[tox]\nenvlist = py311\n"}, ("tox",), None),
    ("ruff.toml", {"ruff.toml": "line-length = 100\n"}, None, RUFF),
    (
        "venv programs",
        {
            "pyproject.toml": "[tool.pytest.ini_options]\n[tool.ruff]\n",
            ".venv/bin/python": "",
            ".venv/bin/ruff": "",
        },
        (".venv/bin/python", "-m", "pytest", "-q"),
        (".venv/bin/ruff", "check", "."),
    ),
    ("broken toml", {"pyproject.toml": "[tool.pytest.ini_options\n"}, None, None),
    (
        "makefile first",
        {"Makefile": "test:\n\tx\n", "pyproject.toml": "[tool.pytest.ini_options]\n[tool.ruff]\n"},
        ("make", "test"),
        RUFF,
    ),
    (
        "package.json before python",
        {"package.json": '{"scripts": {"test": "jest"}}', "yarn.lock": "", "pytest.ini": ""},
        ("yarn", "run", "test"),
        None,
    ),
    (
        "nox",
        {
            "noxfile.py": "import nox\n\n@nox.session(python='3.11')\ndef tests(session):\n    pass\n"
        },
        ("nox", "-s", "tests"),
        None,
    ),
    ("cargo", {"Cargo.toml": '[package]\nname = "x"\n'}, ("cargo", "test"), None),
    (
        "go",
        {"go.mod": "module example.com/x\n\ngo 1.22\n"},
        ("go", "test", "./..."),
        ("go", "vet", "./..."),
    ),
    ("nothing", {"README.md": "# x"}, None, None),
]


@pytest.mark.parametrize(
    ("files", "test", "lint"), [c[1:] for c in DETECT_CASES], ids=[c[0] for c in DETECT_CASES]
)
def test_detect(
    files: dict[str, str], test: tuple[str, ...] | None, lint: tuple[str, ...] | None
) -> None:
    assert detect(files) == ProjectChecks(test, lint)


def test_nox_sessions_behind_other_decorators() -> None:
    text = "@nox.session\n@nox.parametrize('x', [1])\ndef lint(session, x):\n    pass\n"
    assert from_noxfile(text) == ProjectChecks(None, ("nox", "-s", "lint"))


COMMAND_CASES = [
    ("tests", True, False, [["make", "test"]]),
    ("both", True, True, [["make", "test"], ["make", "lint"]]),
    ("nothing asked", False, False, []),
]


@pytest.mark.parametrize(
    ("tests", "lint", "commands"), [c[1:] for c in COMMAND_CASES], ids=[c[0] for c in COMMAND_CASES]
)
def test_check_commands(tests: bool, lint: bool, commands: list[list[str]]) -> None:
    found = ProjectChecks(("make", "test"), ("make", "lint"))
    assert check_commands(found, tests=tests, lint=lint) == commands


def test_a_check_without_a_command_is_none_even_when_the_other_has_one() -> None:
    assert check_commands(ProjectChecks(("make", "test")), tests=True, lint=True) is None
    assert check_commands(ProjectChecks(), tests=True, lint=False) is None


def test_one_command_for_both_runs_once() -> None:
    found = ProjectChecks(("make", "check"), ("make", "check"))
    assert check_commands(found, tests=True, lint=True) == [["make", "check"]]


def test_find_checks_reads_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n[tool.ruff]\n")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_bytes(b"\x7fELF\x00")  # exists: not read
    (tmp_path / "Makefile").write_bytes(b"\xff\xfe not utf-8")  # unreadable: absent
    (tmp_path / "package.json").mkdir()  # not a file: absent
    assert find_checks(tmp_path) == ProjectChecks(
        (".venv/bin/python", "-m", "pytest", "-q"), ("ruff", "check", ".")
    )


def test_find_checks_in_an_empty_or_missing_workspace(tmp_path: Path) -> None:
    assert find_checks(tmp_path) == ProjectChecks()
    assert find_checks(tmp_path / "gone") == ProjectChecks()
