"""Whether agents can be sandboxed on this machine, and if not, why and how to fix it.

The check finds bubblewrap (the configured program, else ``bwrap`` on ``PATH``) and runs it
once the way every sandbox starts (:data:`~.bwrap.BASE_OPTIONS` around ``true``): a kernel that
refuses user namespaces, or an AppArmor profile that restricts them, fails there and not at the
first session. The answer is kept per process and program (one trial of a few milliseconds).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from typing import Final

from bridge.records import record

from .bwrap import BASE_OPTIONS

__all__ = ["INSTALL_FIX", "SandboxSupport", "check_sandbox", "find_bwrap"]

INSTALL_FIX: Final = "install bubblewrap: sudo apt install bubblewrap (Debian, Ubuntu)"
USERNS_FIX: Final = (
    "allow unprivileged user namespaces: sudo sysctl kernel.unprivileged_userns_clone=1, "
    "or on Ubuntu 24.04 and later sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0 "
    "(or an AppArmor profile for bwrap)"
)
_TRIAL_TIMEOUT: Final = 10.0


@record
class SandboxSupport:
    """The answer of :func:`check_sandbox`.

    Attributes:
        available: a trial sandbox ran.
        bwrap: the program found (None when none was).
        reason: why not (empty when available).
        fix: how to make it available (empty when available).
    """

    available: bool
    bwrap: str | None = None
    reason: str = ""
    fix: str = ""


def find_bwrap(configured: str | None, path: str | None) -> str | None:
    """The bubblewrap program: `configured` when given (None if it is not executable), else
    ``bwrap`` on `path`."""
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("bwrap", path=path)


@cache
def check_sandbox(configured: str | None = None, path: str | None = None) -> SandboxSupport:
    """Whether a sandbox runs here (kept per process for each argument pair)."""
    program = find_bwrap(configured, path)
    if program is None:
        where = f"{configured} is not an executable program" if configured else "no bwrap on PATH"
        fix = (
            "set [sandbox] bwrap in config.toml to the bubblewrap program, or " + INSTALL_FIX
            if configured
            else INSTALL_FIX
        )
        return SandboxSupport(False, None, f"bubblewrap is missing ({where})", fix)
    try:
        trial = subprocess.run(
            [program, *BASE_OPTIONS, "--", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_TRIAL_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxSupport(False, program, f"{program} cannot run: {exc}", INSTALL_FIX)
    if trial.returncode == 0:
        return SandboxSupport(True, program)
    said = trial.stderr.decode("utf-8", "replace").strip().splitlines()
    detail = said[-1][:200] if said else f"exit code {trial.returncode}"
    namespaces = any(
        word in detail.lower()
        for word in ("namespace", "uid map", "operation not permitted", "permission denied")
    )
    return SandboxSupport(
        False,
        program,
        f"bubblewrap cannot create a sandbox here: {detail}",
        USERNS_FIX if namespaces else INSTALL_FIX,
    )
