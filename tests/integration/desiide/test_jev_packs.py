"""JEV pack states: the facts gathered from a real temporary git repo."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bridge.desiide.jev.gather import (
    UNKNOWN_BRANCH,
    gather_facts,
    preview_state,
)
from bridge.desiide.jev.packs import (
    PACK_NAMES,
    AvailableModel,
    FileFacts,
)


def git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed project, then a working tree with every kind of change."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "src/app.py", "a\nb\nc\n")  # 6 bytes, 3 lines
    write(root, "README.md", "hello\n")  # 6 bytes, 1 line
    write(root, "docs/guide.md", "x\ny\n")  # 2 lines
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "init")
    write(root, "src/app.py", "a\nb\nc\nd\ne\n")  # +2 lines, 10 bytes
    (root / "README.md").unlink()  # -1 line
    write(root, ".env", "TOKEN=1\n")  # untracked, 1 line
    write(root, "db/migrations/0002_add.sql", "ALTER;\nSELECT;\n")  # untracked, 2 lines
    write(root, "src/new.py", "n\n")  # staged new file, +1 line
    git(root, "add", "src/new.py")
    return root


async def test_facts_of_a_real_repository(repo: Path) -> None:
    facts = await gather_facts(repo, environ={})
    assert (facts.is_git, facts.branch, facts.env) == (True, "main", "local")
    by_path = {f.path: f for f in facts.changes}
    assert by_path == {
        "src/app.py": FileFacts("src/app.py", bytes_before=6, bytes_after=10),
        "README.md": FileFacts("README.md", bytes_before=6, deleted=True),
        ".env": FileFacts(".env", bytes_after=8, created=True),
        "db/migrations/0002_add.sql": FileFacts(
            "db/migrations/0002_add.sql", bytes_after=15, created=True
        ),
        "src/new.py": FileFacts("src/new.py", bytes_after=2, created=True),
    }
    # +2 (app.py) -1 (README) +1 (staged new.py) + 1 (.env) + 2 (migration)
    assert facts.diff_lines == 7
    # tracked files now: src/app.py (5), docs/guide.md (2), src/new.py (1); README is deleted.
    assert facts.project_lines == 8


async def test_a_workspace_below_the_repository_top_sees_only_its_part(repo: Path) -> None:
    facts = await gather_facts(repo / "src", environ={"CI": "1"})
    assert facts.env == "ci"
    assert sorted(f.path for f in facts.changes) == ["app.py", "new.py"]
    assert facts.diff_lines == 3
    assert facts.project_lines == 6


async def test_preview_of_every_pack_from_the_repository(repo: Path) -> None:
    models = [AvailableModel("m1", None, None, "medium")]
    workflow = await preview_state("workflow_select@1", repo, models=models, environ={})
    assert set(workflow) == {
        "taskType",
        "filesTouched",
        "estimatedDiffSize",
        "lastRunStatus",
        "userPreference",
        "availableModels",
    }
    assert workflow["taskType"] == "edit" and workflow["estimatedDiffSize"] == 7
    assert {f["path"]: f["sensitive"] for f in workflow["filesTouched"]}[".env"] is True
    assert workflow["availableModels"] == [
        {"id": "m1", "contextTokens": None, "latencyMs": None, "costTier": "medium"}
    ]

    risk = await preview_state("risk_gate@1", repo, environ={})
    assert risk["actionType"] == "propose_edit" and risk["editFileCount"] == 5
    assert risk["context"] == {"branch": "main", "env": "local", "hasPendingMigrations": True}
    assert sorted(f["path"] for f in risk["filesTouched"] if f["sensitive"]) == [".env"]

    cost = await preview_state("cost_route@1", repo, environ={}, recent_failures=1)
    assert cost == {
        "taskType": "edit",
        "filesTouchedCount": 5,
        "projectSizeLines": 8,
        "userCostBias": "balanced",
        "recentFailures": 1,
    }


async def test_a_state_never_carries_file_contents(repo: Path) -> None:
    write(repo, ".env", "TOKEN=very-secret-value\n")
    for pack in PACK_NAMES:
        state = await preview_state(pack, repo, environ={})
        assert "very-secret-value" not in repr(state)


async def test_detached_head_unborn_branch_and_no_git(tmp_path: Path, repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "--detach", head)
    assert (await gather_facts(repo, environ={}, count_project=False)).branch == "HEAD"

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q", "-b", "trunk")
    write(fresh, "a.txt", "1\n2\n")
    git(fresh, "add", "a.txt")
    write(fresh, "b.txt", "1\n")
    facts = await gather_facts(fresh, environ={})
    assert facts.branch == "trunk"
    assert sorted((f.path, f.created) for f in facts.changes) == [("a.txt", True), ("b.txt", True)]
    assert facts.diff_lines == 3  # 2 staged + 1 untracked
    assert facts.project_lines == 2

    plain = tmp_path / "plain"
    (plain / ".hidden").mkdir(parents=True)
    (plain / "node_modules").mkdir()
    write(plain, "x.py", "1\n2\n3\n")
    write(plain, ".hidden/y.py", "1\n")
    write(plain, "node_modules/z.js", "1\n")
    facts = await gather_facts(plain, environ={})
    assert (facts.is_git, facts.branch, facts.changes, facts.diff_lines) == (
        False,
        UNKNOWN_BRANCH,
        (),
        0,
    )
    assert facts.project_lines == 3
    risk: dict[str, Any] = await preview_state("risk_gate@1", plain, environ={})
    assert risk["context"]["branch"] == "unknown" and risk["filesTouched"] == []


async def test_preview_states_validate_against_the_wire_schema(repo: Path) -> None:
    """The protocol's pydantic models (bridge/desiide/schema/jev.py) accept what we build."""
    schema = pytest.importorskip("bridge.desiide.schema.jev")
    for pack in PACK_NAMES:
        state = await preview_state(
            pack, repo, models=[AvailableModel("m1", None, None, "low", "local")], environ={}
        )
        model = schema.PACK_STATES[schema.KnownPack(pack)]
        model.model_validate(state)
