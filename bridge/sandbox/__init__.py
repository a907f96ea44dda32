"""The agent sandbox: what an agent may see and write, and the bubblewrap command that enforces it.

:mod:`.hidden` (the one list of hidden paths, shared with the permission gate) and :mod:`.policy`
(the plan) are pure; :mod:`.bwrap` turns a plan into a command line; :mod:`.survey` (the disk
facts a plan needs) and :mod:`.probe` (whether bubblewrap runs here) do the I/O.
"""

from .bwrap import BASE_OPTIONS, bwrap_argv
from .hidden import HOME_SECRETS, expand_user, hidden_paths, is_hidden
from .policy import (
    AGENT_STATE,
    MADE_WHEN_MISSING,
    DiskFacts,
    PolicyError,
    SandboxPolicy,
    agent_home,
    agent_state_paths,
    plan_policy,
    state_dirs_to_make,
)
from .probe import INSTALL_FIX, SandboxSupport, check_sandbox, find_bwrap
from .settings import SANDBOX_KEYS, SandboxConfigError, SandboxSettings, parse_sandbox
from .survey import SKIPPED, WALK_DEPTH, WALK_LIMIT, find_git_dirs, make_state_dirs, survey

__all__ = [
    "AGENT_STATE",
    "BASE_OPTIONS",
    "HOME_SECRETS",
    "INSTALL_FIX",
    "MADE_WHEN_MISSING",
    "SANDBOX_KEYS",
    "SKIPPED",
    "WALK_DEPTH",
    "WALK_LIMIT",
    "DiskFacts",
    "PolicyError",
    "SandboxConfigError",
    "SandboxPolicy",
    "SandboxSettings",
    "SandboxSupport",
    "agent_home",
    "agent_state_paths",
    "bwrap_argv",
    "check_sandbox",
    "expand_user",
    "find_bwrap",
    "find_git_dirs",
    "hidden_paths",
    "is_hidden",
    "make_state_dirs",
    "parse_sandbox",
    "plan_policy",
    "state_dirs_to_make",
    "survey",
]
