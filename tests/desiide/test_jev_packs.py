"""JEV pack states: the pure builders (the facts gathered from a real temporary git repo:
tests/integration/desiide/test_jev_packs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.desiide.jev.gather import (
    count_lines,
    detect_env,
    parse_numstat,
    parse_porcelain,
)
from bridge.desiide.jev.packs import (
    MAX_COMMAND_CHARS,
    MAX_FILES,
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
