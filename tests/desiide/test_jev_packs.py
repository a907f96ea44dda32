"""JEV pack states: the pure builders, and the facts gathered from a real temporary git repo."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bridge.desiide.jev.gather import (
    UNKNOWN_BRANCH,
    count_lines,
    detect_env,
    gather_facts,
    parse_numstat,
    parse_porcelain,
    preview_state,
)
from bridge.desiide.jev.packs import (
    MAX_COMMAND_CHARS,
    MAX_FILES,
    PACK_NAMES,
    AvailableModel,
    FileFacts,
    available_models,
    build_cost_route,
    build_risk_gate,
    build_workflow_select,
    cap_command,
    cap_files,
    has_pending_migrations,
    is_sensitive,
)
from bridge.desiide.models.listing import ModelInfo

# --- sensitive, migrations, caps ---------------------------------------------------------------

SENSITIVE = [
    ".env",
    ".env.local",
    "app/.ENV.production",
    "certs/server.pem",
    "tls/private.key",
    "id_rsa",
    "home/id_ed25519.pub",
    "config/credentials.json",
    "credentials",
    "deploy/secrets.yaml",
    "secret.txt",
    ".npmrc",
    ".git/config",
    "sub/.ssh/known_hosts",
    ".aws/config",
    "store.p12",
    ".git",
]
NOT_SENSITIVE = [
    "src/app.py",
    "README.md",
    "environment.py",
    "docs/keys.md",
    "keyboard.c",
    "src/secretary.py",
    "monkey.txt",
    "",
    ".",
]


@pytest.mark.parametrize("path", SENSITIVE)
def test_sensitive_paths(path: str) -> None:
    assert is_sensitive(path) is True


@pytest.mark.parametrize("path", NOT_SENSITIVE)
def test_ordinary_paths(path: str) -> None:
    assert is_sensitive(path) is False


@pytest.mark.parametrize(
    ("paths", "pending"),
    [
        (["app/migrations/0002_add.py"], True),
        (["db/migrate/20240101_create.rb"], True),
        (["prisma/migrations/2024/migration.sql"], True),
        (["alembic/versions/abc_add.py"], True),
        (["src/Migrations/V2__x.sql"], True),
        (["src/app.py", "README.md"], False),
        (["migrations.md"], False),
        (["alembic/env.py"], False),
        ([], False),
    ],
)
def test_pending_migrations_heuristic(paths: list[str], pending: bool) -> None:
    assert has_pending_migrations(paths) is pending


def test_cap_command() -> None:
    assert cap_command("x" * MAX_COMMAND_CHARS) == "x" * 500
    cut = cap_command("y" * 501)
    assert len(cut) == 500 and cut.endswith("…") and cut[:499] == "y" * 499


def test_cap_files_keeps_sensitive_ones_first_and_dedups() -> None:
    paths = [f"src/f{i}.py" for i in range(58)] + ["src/f0.py", ".env", "key.pem"]
    kept, cut = cap_files(paths, lambda p: p, is_sensitive)
    assert len(kept) == MAX_FILES == 50
    assert kept[:2] == [".env", "key.pem"]
    assert kept[2:] == [f"src/f{i}.py" for i in range(48)]
    assert cut == 60 - 50
    small, none_cut = cap_files(["a", "b", "a"], lambda p: p, is_sensitive)
    assert (small, none_cut) == (["a", "b"], 0)


# --- builders ----------------------------------------------------------------------------------


def test_build_workflow_select() -> None:
    state = build_workflow_select(
        task_type="fix",
        files=[
            FileFacts("src/a.py", bytes_before=10, bytes_after=12),
            FileFacts(".env", bytes_after=3, created=True),
            FileFacts("old.txt", bytes_before=5, deleted=True),
        ],
        estimated_diff_size=7,
        last_run_status="failed",
        user_preference=None,
        available_models=[AvailableModel("m1", 200000, None, "low", "local")],
    )
    assert state == {
        "taskType": "fix",
        "filesTouched": [
            {"path": "src/a.py", "sensitive": False, "bytesBefore": 10, "bytesAfter": 12},
            {"path": ".env", "sensitive": True, "bytesAfter": 3, "created": True},
            {"path": "old.txt", "sensitive": False, "bytesBefore": 5, "deleted": True},
        ],
        "estimatedDiffSize": 7,
        "lastRunStatus": "failed",
        "userPreference": "balanced",
        "availableModels": [
            {
                "id": "m1",
                "contextTokens": 200000,
                "latencyMs": None,
                "costTier": "low",
                "locality": "local",
            }
        ],
    }


def test_build_workflow_select_truncates() -> None:
    files = [FileFacts(f"f{i}.txt") for i in range(75)]
    state = build_workflow_select(
        task_type="edit",
        files=files,
        estimated_diff_size=0,
        last_run_status="none",
        user_preference="cheap",
        available_models=[],
    )
    assert len(state["filesTouched"]) == 50 and state["truncatedCount"] == 25
    assert state["userPreference"] == "cheap"


def test_build_risk_gate() -> None:
    state = build_risk_gate(
        action_type="run_command",
        command="rm -rf build && " + "x" * 600,
        paths=["build", ".env"],
        branch="main",
        env="local",
        has_pending_migrations=True,
    )
    assert list(state) == ["actionType", "command", "context", "filesTouched"]
    assert len(state["command"]) == 500
    assert state["context"] == {"branch": "main", "env": "local", "hasPendingMigrations": True}
    assert state["filesTouched"] == [
        {"path": "build", "sensitive": False},
        {"path": ".env", "sensitive": True},
    ]
    edit = build_risk_gate(
        action_type="propose_edit",
        paths=[f"p{i}" for i in range(51)],
        edit_file_count=51,
        branch="b",
        env="ci",
        has_pending_migrations=False,
    )
    assert edit["editFileCount"] == 51 and edit["truncatedCount"] == 1
    assert "command" not in edit


def test_build_cost_route() -> None:
    assert build_cost_route(
        task_type="ask",
        files_touched_count=3,
        project_size_lines=1200,
        user_cost_bias="best",
        recent_failures=2,
    ) == {
        "taskType": "ask",
        "filesTouchedCount": 3,
        "projectSizeLines": 1200,
        "userCostBias": "best",
        "recentFailures": 2,
    }


def test_available_models_from_the_catalog() -> None:
    infos = [
        ModelInfo("a", "A", "anthropic", "config", "a", "remote", 200000, "high"),
        ModelInfo("ollama:q", "q", "ollama", "discovered", "q", "local"),
        ModelInfo("claude:opus", "opus", "claude-code", "agent", "opus", "remote"),
    ]
    assert [m.to_wire() for m in available_models(infos, {"a": 420})] == [
        {"id": "a", "contextTokens": 200000, "latencyMs": 420, "costTier": "high", "locality": "remote"},
        {"id": "ollama:q", "contextTokens": None, "latencyMs": None, "costTier": "low", "locality": "local"},
        {"id": "claude:opus", "contextTokens": None, "latencyMs": None, "costTier": "medium", "locality": "remote"},
    ]  # fmt: skip


# --- git parsing -------------------------------------------------------------------------------


def test_parse_porcelain_strips_the_prefix_and_skips_rename_sources() -> None:
    output = "\0".join(
        [" M sub/a.py", "?? sub/new dir/x.txt", "R  sub/b.py", "sub/old.py", "?? other/z", "D  sub/gone", ""]
    )  # fmt: skip
    assert parse_porcelain(output, "sub/") == [
        (" M", "a.py"),
        ("??", "new dir/x.txt"),
        ("R ", "b.py"),
        ("D ", "gone"),
    ]


def test_parse_numstat() -> None:
    assert parse_numstat("3\t1\ta.py\n-\t-\tbin.png\n10\t0\told => new\nbad line\n") == 14


def test_detect_env() -> None:
    assert detect_env({}) == "local"
    assert detect_env({"CI": "false"}) == "local"
    assert detect_env({"CI": "true"}) == "ci"
    assert detect_env({"GITHUB_ACTIONS": "true"}) == "ci"


def test_count_lines(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"one\ntwo\nthree")
    (tmp_path / "b").write_bytes(b"one\n")
    (tmp_path / "bin").write_bytes(b"\0\1\2\n")
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert [count_lines(tmp_path / n) for n in ("a", "b", "bin", "empty", "link", "nope")] == [
        3,
        1,
        None,
        0,
        None,
        None,
    ]
    assert count_lines(tmp_path / "a", limit=4) is None


# --- a real repository -------------------------------------------------------------------------


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
