"""The disk facts of a plan (real files in a tmp dir) and the availability check's answers
when no bwrap can be found (its runs of bwrap: tests/integration/sandbox/test_survey.py)."""

from __future__ import annotations

from pathlib import Path

from bridge.sandbox import (
    DiskFacts,
    check_sandbox,
    find_bwrap,
    find_git_dirs,
    make_state_dirs,
    state_dirs_to_make,
    survey,
)
from bridge.sandbox.probe import INSTALL_FIX


def test_existing_hidden_paths_by_kind_and_symlink_targets(tmp_path: Path) -> None:
    (tmp_path / "ssh").mkdir()
    (tmp_path / "netrc").write_text("x")
    real = tmp_path / "real-keys"
    real.mkdir()
    (tmp_path / "keys").symlink_to(real)
    hidden = [str(tmp_path / n) for n in ("ssh", "netrc", "keys", "missing")]
    facts = survey(hidden, str(tmp_path))
    assert facts.hidden_dirs == (str(tmp_path / "ssh"), str(tmp_path / "keys"), str(real))
    assert facts.hidden_files == (str(tmp_path / "netrc"),)


def test_repositories_in_the_folder_and_around_it(tmp_path: Path) -> None:
    outer = tmp_path / "repo"
    (outer / ".git" / "hooks").mkdir(parents=True)
    work = outer / "sub"
    (work / "lib" / ".git").mkdir(parents=True)  # no hooks dir yet: made
    (work / "node_modules" / "dep" / ".git").mkdir(parents=True)  # skipped
    (work / ".git" / "modules" / "vendored" / "hooks").mkdir(parents=True)
    (work / ".git" / "modules" / "vendored" / "HEAD").write_text("ref: x")
    facts = survey([], str(work))
    assert facts.enclosing_git == str(outer / ".git")
    assert sorted(facts.git_dirs) == sorted(
        [
            str(work / ".git"),
            str(work / ".git" / "modules" / "vendored"),
            str(work / "lib" / ".git"),
        ]
    )
    assert (work / "lib" / ".git" / "hooks").is_dir()
    assert facts == DiskFacts((), (), facts.git_dirs, str(outer / ".git"))


def test_the_walk_is_bounded_in_depth(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*"abcdefgh")
    (deep / ".git").mkdir(parents=True)
    assert find_git_dirs(str(tmp_path)) == []


def test_a_missing_program_says_how_to_install_it(tmp_path: Path) -> None:
    assert find_bwrap(None, str(tmp_path)) is None
    missing = check_sandbox(None, str(tmp_path))
    assert not missing.available
    assert missing.fix == INSTALL_FIX
    configured = check_sandbox(str(tmp_path / "bwrap"), None)
    assert "[sandbox] bwrap" in configured.fix and "not an executable" in configured.reason


def test_the_agents_missing_state_dirs_are_made_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert [Path(p).name for p in state_dirs_to_make({"HOME": str(home)}, str(home), "claude")] == [
        ".claude",
        ".cache",
    ]
    state = state_dirs_to_make({"HOME": str(home)}, str(home), "acp")
    assert [Path(p).name for p in state] == [
        "opencode",
        "opencode",
        "opencode",
        ".gemini",
        ".cache",
    ]
    make_state_dirs(state)
    for path in state:
        assert Path(path).is_dir() and Path(path).stat().st_mode & 0o777 == 0o700
    assert not (home / ".claude.json").exists()  # a file: never made
