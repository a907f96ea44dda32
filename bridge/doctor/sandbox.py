"""The ``sandbox`` check: whether agents run confined here, what is hidden from them, and why not.

It reports what a session would get: bubblewrap found and a trial sandbox run (or why not and
how to fix it), ``[sandbox] enabled`` / ``required``, the hidden paths that exist on this machine
(the bridge home and its secret files, the well-known secrets, the user's additions) and the
well-known ones the user un-hid. A failure only when the sandbox is required and cannot run
(sessions would fail); a warning when it is off or unavailable (agents run unconfined).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from bridge.config import Settings
from bridge.doctor.model import Check, Status
from bridge.sandbox import check_sandbox, expand_user, hidden_paths

__all__ = ["check_sandbox_support"]


def check_sandbox_support(settings: Settings, env: Mapping[str, str]) -> Check:
    """The ``sandbox`` line of the report (blocking: runs a trial sandbox once)."""
    sandbox = settings.sandbox
    home = env.get("HOME") or str(Path.home())
    secret_files = [
        str(p) for p in (settings.key_file, settings.register_token_file) if p is not None
    ]
    if env.get("CREDENTIALS_DIRECTORY"):
        secret_files.append(env["CREDENTIALS_DIRECTORY"])
    hidden = hidden_paths(
        home,
        str(settings.home),
        secret_files=secret_files,
        extra=sandbox.hide,
        unhidden=sandbox.unhide,
    )
    present = [path for path in hidden if os.path.lexists(path)]
    unhidden = [expand_user(path, home) for path in sandbox.unhide]
    details = {
        "enabled": sandbox.enabled,
        "required": sandbox.required,
        "hidden": present,
        "unhidden": unhidden,
        "writable_extra": list(sandbox.writable),
    }
    shown = f"; un-hidden by config: {', '.join(unhidden)}" if unhidden else ""
    listed = f"hides {len(present)} path(s) here: {', '.join(present)}{shown}"
    if not sandbox.enabled:
        return Check(
            "sandbox",
            Status.WARN,
            "off ([sandbox] enabled = false): agents run unconfined and can read every file "
            "you can, the bridge's own key included",
            "remove `enabled = false` from [sandbox] in config.toml",
            details,
        )
    support = check_sandbox(sandbox.bwrap, env.get("PATH"))
    details.update(available=support.available, bwrap=support.bwrap, reason=support.reason)
    if support.available:
        return Check(
            "sandbox",
            Status.PASS,
            f"agents run under bubblewrap ({support.bwrap}); {listed}",
            details=details,
        )
    if sandbox.required:
        return Check(
            "sandbox",
            Status.FAIL,
            f"required but unavailable, sessions fail to start: {support.reason}",
            support.fix,
            details,
        )
    return Check(
        "sandbox",
        Status.WARN,
        f"unavailable, agents run unconfined: {support.reason}",
        support.fix,
        details,
    )
