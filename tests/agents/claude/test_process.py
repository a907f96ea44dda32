"""The CLI process: argv and environment, its death with the host, stopping, exit reasons."""

from __future__ import annotations

import os

import pytest

from bridge.agents.claude import (
    CliOptions,
    build_argv,
    bundled_cli_path,
    cli_env,
    exit_reason,
    sdk_version,
)

ARGV_CASES = [
    (
        "new conversation",
        CliOptions("plan", session_id="abc"),
        ["--permission-prompt-tool", "stdio", "--permission-mode", "plan", "--session-id=abc"],
    ),
    (
        "resume wins over a session id",
        CliOptions("default", model="opus", effort="low", resume="r", session_id="s"),
        [
            "--model",
            "opus",
            "--permission-prompt-tool",
            "stdio",
            "--permission-mode",
            "default",
            "--resume=r",
        ],
    ),
    (
        "no prompts (the model probe)",
        CliOptions("plan", permission_prompt=False),
        ["--permission-mode", "plan"],
    ),
]


@pytest.mark.parametrize(
    ("options", "middle"), [c[1:] for c in ARGV_CASES], ids=[c[0] for c in ARGV_CASES]
)
def test_argv(options: CliOptions, middle: list[str]) -> None:
    argv = build_argv("/bin/claude", options)
    head = ["/bin/claude", "--output-format", "stream-json", "--verbose"]
    tail = ["--setting-sources=user,project"]
    if options.effort:
        tail += ["--effort", options.effort]
    assert argv == [*head, *middle, *tail, "--input-format", "stream-json"]


def test_env_is_the_given_one_plus_the_sdk_variables() -> None:
    env = cli_env(
        {"A": "1", "CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": "cli", "PWD": "/elsewhere"}, "/w"
    )
    assert env == {
        "A": "1",
        "PWD": "/w",
        "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
        "CLAUDE_AGENT_SDK_VERSION": sdk_version(),
        "CLAUDE_CODE_SDK_READS_SESSION_STATE": "1",
    }


def test_the_bundled_cli_and_the_sdk_version_are_found_without_importing_the_sdk() -> None:
    path = bundled_cli_path()
    assert path is not None and path.name == "claude" and os.access(path, os.X_OK)
    source = (path.parent.parent / "_version.py").read_text()
    assert f'__version__ = "{sdk_version()}"' in source


@pytest.mark.parametrize(
    ("code", "reason"), [(0, "exit code 0"), (3, "exit code 3"), (-9, "killed by signal 9")]
)
def test_exit_reason(code: int, reason: str) -> None:
    assert exit_reason(code) == reason
