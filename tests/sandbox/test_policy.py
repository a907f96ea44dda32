"""The sandbox's plan: what an agent may write, what it must not see, and in which order."""

from __future__ import annotations

import pytest

from bridge.sandbox import (
    AGENT_STATE,
    BASE_OPTIONS,
    DiskFacts,
    PolicyError,
    SandboxPolicy,
    agent_state_paths,
    bwrap_argv,
    hidden_paths,
    plan_policy,
)

HOME = "/home/u"
BRIDGE = "/home/u/.codedeck"


def plan(
    cwd: str = "/home/u/proj", env: dict[str, str] | None = None, **kw: object
) -> SandboxPolicy:
    hidden = hidden_paths(HOME, BRIDGE)
    facts = kw.pop("facts", DiskFacts(hidden_dirs=(BRIDGE, f"{HOME}/.ssh")))
    assert isinstance(facts, DiskFacts)
    return plan_policy(
        bwrap="/usr/bin/bwrap",
        cwd=cwd,
        env={"HOME": HOME} if env is None else env,
        home=HOME,
        hidden=hidden,
        facts=facts,
        **kw,  # type: ignore[arg-type]
    )


def test_the_agents_state_and_caches_are_writable_under_the_home() -> None:
    policy = plan()
    for rel in (
        ".claude",
        ".claude.json",
        ".config/opencode",
        ".local/share/opencode",
        ".local/state/opencode",
        ".gemini",
        ".cache",
        ".npm",
        ".cargo/registry",
        ".cargo/git",
        "go/pkg/mod",
        ".m2",
        ".gradle",
        ".local/share/pnpm",
        ".bun/install/cache",
        ".yarn",
    ):
        assert f"{HOME}/{rel}" in policy.writable
    assert len(policy.writable) == len(AGENT_STATE)
    assert policy.cwd == "/home/u/proj"
    assert HOME not in policy.writable  # the home itself stays read-only


CASES = [
    ("CLAUDE_CONFIG_DIR", "/srv/claude", "/srv/claude"),
    ("XDG_CONFIG_HOME", "/x/config", "/x/config/opencode"),
    ("XDG_DATA_HOME", "/x/data", "/x/data/opencode"),
    ("XDG_STATE_HOME", "/x/state", "/x/state/opencode"),
    ("XDG_CACHE_HOME", "/x/cache", "/x/cache"),
    ("CARGO_HOME", "/c", "/c/registry"),
    ("GOMODCACHE", "/go/mod", "/go/mod"),
]


@pytest.mark.parametrize(("variable", "value", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_agents_own_variables_move_its_state(variable: str, value: str, expected: str) -> None:
    paths = agent_state_paths({"HOME": HOME, variable: value}, HOME)
    assert expected in paths


def test_a_relative_variable_is_ignored_and_the_agents_home_is_its_own() -> None:
    paths = agent_state_paths({"CLAUDE_CONFIG_DIR": "rel/dir"}, "/tmp/h")
    assert "/tmp/h/.claude" in paths
    policy = plan(env={"HOME": "/tmp/agent-home"})
    assert "/tmp/agent-home/.claude" in policy.writable
    assert f"{HOME}/.claude" not in policy.writable


def test_a_writable_path_at_or_below_a_hidden_one_is_dropped() -> None:
    policy = plan(
        env={
            "HOME": HOME,
            "XDG_CACHE_HOME": f"{BRIDGE}/cache",
            "CLAUDE_CONFIG_DIR": f"{HOME}/.ssh",
        },
        extra_writable=["~/.gnupg/x", "~/.pub-cache", BRIDGE],
    )
    assert f"{HOME}/.pub-cache" in policy.writable
    for path in policy.writable:
        assert not path.startswith(BRIDGE)
        assert not path.startswith(f"{HOME}/.ssh")
        assert not path.startswith(f"{HOME}/.gnupg")


@pytest.mark.parametrize("cwd", [BRIDGE, f"{BRIDGE}/hosts/x", f"{HOME}/.ssh"])
def test_a_session_folder_inside_a_hidden_path_is_refused(cwd: str) -> None:
    with pytest.raises(PolicyError, match="inside a path hidden from agents"):
        plan(cwd=cwd)


def test_a_hidden_symlink_target_counts_as_hidden() -> None:
    facts = DiskFacts(hidden_dirs=("/data/ssh-keys",))
    with pytest.raises(PolicyError):
        plan(cwd="/data/ssh-keys/sub", facts=facts)


def test_hooks_are_read_only_and_the_enclosing_git_dir_is_writable() -> None:
    facts = DiskFacts(
        git_dirs=("/home/u/repo/sub/.git", "/home/u/repo/sub/vendor/lib/.git"),
        enclosing_git="/home/u/repo/.git",
    )
    policy = plan(cwd="/home/u/repo/sub", facts=facts)
    assert "/home/u/repo/.git" in policy.writable
    assert policy.read_only == (
        "/home/u/repo/sub/.git/hooks",
        "/home/u/repo/sub/vendor/lib/.git/hooks",
        "/home/u/repo/.git/hooks",
    )


def test_the_bwrap_argv_mounts_in_the_policys_order() -> None:
    policy = SandboxPolicy(
        bwrap="/usr/bin/bwrap",
        cwd="/w/p",
        writable=("/h/.claude",),
        hidden_dirs=("/h/.ssh",),
        hidden_files=("/h/.netrc",),
        read_only=("/w/p/.git/hooks",),
    )
    argv = bwrap_argv(policy, ["claude", "--verbose"], tmp="/tmp/t1", empty_file="/tmp/e")
    assert argv[: 1 + len(BASE_OPTIONS)] == ["/usr/bin/bwrap", *BASE_OPTIONS]
    for option in ("--unshare-pid", "--die-with-parent", "--new-session", "--unshare-ipc", "ALL"):
        assert option in BASE_OPTIONS
    rest = argv[1 + len(BASE_OPTIONS) :]
    assert rest == [
        "--bind-try", "/w/p", "/w/p",
        "--bind-try", "/tmp/t1", "/tmp/t1",
        "--bind-try", "/h/.claude", "/h/.claude",
        "--tmpfs", "/h/.ssh", "--remount-ro", "/h/.ssh",
        "--ro-bind", "/tmp/e", "/h/.netrc",
        "--ro-bind-try", "/w/p/.git/hooks", "/w/p/.git/hooks",
        "--setenv", "TMPDIR", "/tmp/t1",
        "--chdir", "/w/p",
        "--", "claude", "--verbose",
    ]  # fmt: skip
