"""What one agent may write and what it must not see: the sandbox's policy, planned without I/O.

Theory of operation. The daemon plans a policy per agent spawn from what it knows (the session's
folder, the agent's own environment, the configuration) and from what an I/O caller found on
disk (:class:`DiskFacts`: which hidden paths exist and of what kind, which git repositories lie
in the folder or enclose it). The session host turns the policy into a bubblewrap command
(:mod:`.bwrap`). Everything is spelled as absolute, normalised paths.

- **Read-only**: the whole system, the home included.
- **Writable**: the session's folder (its ``cwd``, not the workspace root), the agent's own
  state and credentials and the usual build caches (:data:`AGENT_STATE`, one table, where the
  agent's variables move them: ``CLAUDE_CONFIG_DIR``, ``XDG_*``, ``CARGO_HOME`` …), the user's
  ``[sandbox] writable`` additions, and — when the folder is a subfolder of a git repository —
  that repository's ``.git`` (a commit writes objects and refs there). The host adds a private
  temporary directory (``TMPDIR``) of its own.
- **Hidden** (an empty, read-only mount): the paths of :func:`~.hidden.hidden_paths` that exist,
  and the targets of those that are symlinks. A writable path at or below a hidden one is
  dropped: nothing re-exposes what is hidden, and a session folder inside one is refused.
- **Read-only inside the writable**: the ``hooks`` of every git directory found (hooks run code
  later, outside any check); ``.git/config`` stays writable (the gate makes a card of keys that
  run commands).

Mount order is part of the policy: writable binds first, then the hidden mounts, then the
read-only hooks, because a later mount wins over an earlier one at the same or a parent path.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from bridge.records import record

from .hidden import expand_user, is_hidden

__all__ = [
    "AGENT_STATE",
    "MADE_WHEN_MISSING",
    "DiskFacts",
    "PolicyError",
    "SandboxPolicy",
    "agent_home",
    "agent_state_paths",
    "plan_policy",
    "state_dirs_to_make",
]

AGENT_STATE: Final[tuple[tuple[str | None, str, str], ...]] = (
    # (variable that moves it, the part below that variable, where it is otherwise, from ~)
    # the agents' own state directories: Claude Code's config, OpenCode's, Gemini CLI's
    ("CLAUDE_CONFIG_DIR", "", ".claude"),
    ("XDG_CONFIG_HOME", "opencode", ".config/opencode"),
    ("XDG_DATA_HOME", "opencode", ".local/share/opencode"),
    ("XDG_STATE_HOME", "opencode", ".local/state/opencode"),
    (None, "", ".gemini"),
    # the XDG cache, where most tools keep theirs
    ("XDG_CACHE_HOME", "", ".cache"),
    # Claude Code's global state file (without CLAUDE_CONFIG_DIR; it replaces it by a rename
    # in the home, which stays read-only: bound so that an in-place write works)
    (None, "", ".claude.json"),
    # build and package caches
    ("npm_config_cache", "", ".npm"),
    ("CARGO_HOME", "registry", ".cargo/registry"),
    ("CARGO_HOME", "git", ".cargo/git"),
    ("GOMODCACHE", "", "go/pkg/mod"),
    (None, "", ".m2"),
    ("GRADLE_USER_HOME", "", ".gradle"),
    ("XDG_DATA_HOME", "pnpm", ".local/share/pnpm"),
    ("BUN_INSTALL", "install/cache", ".bun/install/cache"),
    (None, "", ".yarn"),
)
"""The agents' own state and the build caches an agent may write: one table, one place."""
MADE_WHEN_MISSING: Final[Mapping[str, tuple[str, ...]]] = {
    "claude": (".claude", ".cache"),
    "acp": (
        ".config/opencode",
        ".local/share/opencode",
        ".local/state/opencode",
        ".gemini",
        ".cache",
    ),
}
"""Per agent kind, the rows of :data:`AGENT_STATE` (by their place in the home) that are
directories made (0700) before a spawn when missing: the agent's own state and the XDG cache.
Only what exists can be bound writable, and an agent whose config directory is not there yet
must be able to start (the other rows are made by their tools when the user first runs them
outside)."""


class PolicyError(ValueError):
    """No policy can confine this spawn as asked; the text says why (user-readable)."""


@record
class DiskFacts:
    """What the daemon found on disk for one plan (the I/O the planner does not do).

    Attributes:
        hidden_dirs: hidden paths (and symlink targets) that are directories.
        hidden_files: hidden paths (and symlink targets) that are files (or sockets, devices).
        git_dirs: the ``.git`` directories of the repositories in the session folder.
        enclosing_git: the ``.git`` directory of the repository whose working tree holds the
            folder, when the folder is not that repository's top (None otherwise).
    """

    hidden_dirs: tuple[str, ...] = ()
    hidden_files: tuple[str, ...] = ()
    git_dirs: tuple[str, ...] = ()
    enclosing_git: str | None = None


@record
class SandboxPolicy:
    """One agent's sandbox (see the module docstring); JSON-able, it travels in the launch spec.

    Attributes:
        bwrap: the bubblewrap program (absolute).
        cwd: the session folder: writable, and where the agent starts.
        writable: every other writable path (bound if it exists).
        hidden_dirs / hidden_files: mounted over with an empty read-only directory / file.
        read_only: re-bound read-only after the writable ones (git hooks).
    """

    bwrap: str
    cwd: str
    writable: tuple[str, ...] = ()
    hidden_dirs: tuple[str, ...] = ()
    hidden_files: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()


def agent_home(env: Mapping[str, str], fallback: str) -> str:
    """The agent's home: its ``HOME`` when absolute, else `fallback`."""
    home = env.get("HOME", "")
    return posixpath.normpath(home) if home.startswith("/") else fallback


def agent_state_paths(env: Mapping[str, str], home: str) -> tuple[str, ...]:
    """The rows of :data:`AGENT_STATE` for an agent with environment `env` and home `home`."""
    return tuple(dict.fromkeys(_state_path(row, env, home) for row in AGENT_STATE))


def state_dirs_to_make(env: Mapping[str, str], home: str, kind: str) -> tuple[str, ...]:
    """The directories of :data:`MADE_WHEN_MISSING` for an agent of `kind` (``claude`` or
    ``acp``), with environment `env` and home `home`."""
    wanted = MADE_WHEN_MISSING[kind]
    rows = (row for row in AGENT_STATE if row[2] in wanted)
    return tuple(dict.fromkeys(_state_path(row, env, home) for row in rows))


def _state_path(row: tuple[str | None, str, str], env: Mapping[str, str], home: str) -> str:
    """Where one row of :data:`AGENT_STATE` lies for an agent with `env` and `home`."""
    variable, below, default = row
    moved = env.get(variable, "") if variable is not None else ""
    if moved.startswith("/"):
        return posixpath.normpath(posixpath.join(moved, below) if below else moved)
    return posixpath.join(home, default)


def plan_policy(
    *,
    bwrap: str,
    cwd: str,
    env: Mapping[str, str],
    home: str,
    hidden: Sequence[str],
    facts: DiskFacts,
    extra_writable: Iterable[str] = (),
) -> SandboxPolicy:
    """The policy of one agent spawn.

    Args:
        bwrap: the bubblewrap program.
        cwd: the session folder (absolute, resolved).
        env: the agent's environment (its ``HOME`` and the variables of :data:`AGENT_STATE`).
        home: the home the configuration's ``~`` means (the daemon's).
        hidden: every path the agent must not see (:func:`~.hidden.hidden_paths`).
        facts: what was found on disk for these paths and this folder.
        extra_writable: the user's ``[sandbox] writable`` (``~``-relative or absolute).

    Raises:
        PolicyError: the session folder is, or lies inside, a hidden path.
    """
    cwd = posixpath.normpath(cwd)
    every_hidden = (*hidden, *facts.hidden_dirs, *facts.hidden_files)
    if is_hidden(cwd, every_hidden):
        raise PolicyError(
            f"the session folder {cwd} is inside a path hidden from agents "
            "(the bridge home or a secret); start the session in another folder"
        )
    wanted = [
        *agent_state_paths(env, agent_home(env, home)),
        *(expand_user(path, home) for path in extra_writable),
    ]
    if facts.enclosing_git is not None:
        wanted.append(facts.enclosing_git)
    writable = tuple(
        path
        for path in dict.fromkeys(posixpath.normpath(p) for p in wanted)
        if path != cwd and not is_hidden(path, every_hidden)
    )
    git_dirs = [*facts.git_dirs]
    if facts.enclosing_git is not None:
        git_dirs.append(facts.enclosing_git)
    hooks = tuple(dict.fromkeys(posixpath.join(posixpath.normpath(g), "hooks") for g in git_dirs))
    return SandboxPolicy(
        bwrap=bwrap,
        cwd=cwd,
        writable=writable,
        hidden_dirs=tuple(dict.fromkeys(facts.hidden_dirs)),
        hidden_files=tuple(dict.fromkeys(facts.hidden_files)),
        read_only=hooks,
    )
