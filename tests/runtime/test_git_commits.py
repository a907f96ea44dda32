"""The commit watcher's fast path: which shell lines may be a commit (the watcher against a real
git repository: tests/integration/runtime/test_git_commits.py)."""

from __future__ import annotations

import pytest

from bridge.runtime.errands.git_commits import is_git_commit


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git commit -m x", True),
        ("git add . && git commit -am 'y'", True),
        ("git commit --help", False),
        ("git status", False),
    ],
)
def test_fast_path_recognises_git_commit(command: str, expected: bool) -> None:
    assert is_git_commit(command) is expected
