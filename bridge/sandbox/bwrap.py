"""A :class:`~.policy.SandboxPolicy` and an agent's argv as one bubblewrap command line (pure).

The order of the mounts is the policy's (a later mount wins at the same or a parent path):

1. ``--ro-bind / /``: the whole system, read-only; then a fresh ``/dev`` and a ``/proc`` of the
   sandbox's own pid namespace.
2. ``--bind-try`` the session folder, the private tmp and every writable path (a missing one is
   skipped: nothing is created on the real disk).
3. Hidden directories: ``--tmpfs`` then ``--remount-ro`` (empty and read-only); hidden files:
   ``--ro-bind`` of an empty regular file (``/dev/null`` would not do: binds are ``nodev``, so
   opening it fails with EACCES, and a tool that reads ``~/.npmrc`` or ``~/.netrc`` would fail
   rather than find it empty). After the writable binds, so a secret inside a writable folder
   stays hidden.
4. ``--ro-bind-try`` the git hooks, last, over their writable repositories.

The namespaces and process rules: ``--unshare-pid`` (the agent sees only its own processes, so
neither ``/proc/<daemon>/environ`` nor ``ptrace`` of the bridge that holds the identity key in
memory), ``--unshare-ipc`` (no System V shared memory of other processes), ``--die-with-parent``
(the agent dies with the session host, as ``PR_SET_PDEATHSIG`` makes the bwrap process itself),
``--new-session`` (no ``TIOCSTI`` into a terminal the host was started from; the host signals
processes, never a terminal's group), ``--cap-drop ALL`` (bubblewrap run by root keeps root's
capabilities inside, and with ``CAP_SYS_ADMIN`` an agent could unmount what hides a secret or
remount ``/`` writable; an unprivileged bwrap drops them anyway, and the kernel locks the mounts
against a user namespace the agent makes itself). The network is shared: the agent must reach its
model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .policy import SandboxPolicy

__all__ = ["BASE_OPTIONS", "bwrap_argv"]

BASE_OPTIONS: Final[tuple[str, ...]] = (
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-pid",
    "--unshare-ipc",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
)
"""What every sandbox starts with: the system read-only, its own /dev and /proc, and the
process rules (see the module docstring)."""


def bwrap_argv(
    policy: SandboxPolicy, argv: Sequence[str], *, tmp: str, empty_file: str
) -> list[str]:
    """The command line that runs `argv` under `policy`, with `tmp` as its writable ``TMPDIR``.

    Args:
        policy: the plan.
        argv: the agent's own command line (its program first).
        tmp: the host's private temporary directory for this agent (it exists).
        empty_file: an empty, read-only regular file, mounted over each hidden file (outside
            `tmp`: the agent must not be able to fill it).
    """
    out = [policy.bwrap, *BASE_OPTIONS]
    for path in (policy.cwd, tmp, *policy.writable):
        out += ["--bind-try", path, path]
    for path in policy.hidden_dirs:
        out += ["--tmpfs", path, "--remount-ro", path]
    for path in policy.hidden_files:
        out += ["--ro-bind", empty_file, path]
    for path in policy.read_only:
        out += ["--ro-bind-try", path, path]
    out += ["--setenv", "TMPDIR", tmp, "--chdir", policy.cwd, "--", *argv]
    return out
