"""The commit watcher against a real git repository."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bridge.engine.inputs import Input, SessionCommitted
from bridge.runtime.errands.git_commits import CommitWatcher, git_head

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


async def test_a_commit_is_reported_once(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    fed: list[Input] = []
    watcher = CommitWatcher(fed.append)
    await watcher.watch("s1", tmp_path, committed=False)  # no commit yet: HEAD is None
    await watcher.check()
    assert fed == []
    (tmp_path / "a").write_text("a")
    git(tmp_path, "add", "a")
    git(tmp_path, "commit", "-q", "-m", "first")
    await watcher.check()
    await watcher.check("s1")
    assert fed == [SessionCommitted("s1")]


async def test_already_committed_sessions_and_non_repositories_stay_quiet(tmp_path: Path) -> None:
    fed: list[Input] = []
    watcher = CommitWatcher(fed.append)
    await watcher.watch("plain", tmp_path, committed=False)
    await watcher.check()
    assert git_head(tmp_path) is None and fed == []
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    await watcher.watch("done", repo, committed=True)
    (repo / "a").write_text("a")
    git(repo, "add", "a")
    git(repo, "commit", "-q", "-m", "x")
    await watcher.check()
    assert fed == []
