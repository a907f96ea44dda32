"""Doctor checks of this machine: the home and database permissions, the identity, credentials.

Nothing here writes: the home is not created, modes are reported rather than tightened (the
daemon tightens them at start, with a warning, but a doctor that silently fixed them would hide
that the files were exposed), and the database is opened read-only (`store.readonly`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from bridge.doctor.model import Check, Status
from bridge.nostr.keys import Keypair, NostrKeyError
from bridge.runtime.identity import IdentityError, read_key_file
from bridge.service import ENV_FILE_NAME
from store.db import BRIDGE_DB_FILENAME
from store.errors import CorruptDatabase, StoreError
from store.home import blocking_file, read_only_reason, unwritable_fix
from store.readonly import NoDatabase, open_readonly
from store.schema import BRIDGE_MIGRATIONS

__all__ = [
    "CREDENTIAL_VARIABLES",
    "SERVICE_ENV_FILE",
    "check_credentials",
    "check_database",
    "check_home",
    "check_identity",
    "claude_login_file",
    "home_unusable",
]

SERVICE_ENV_FILE: Final = ENV_FILE_NAME
CREDENTIAL_VARIABLES: Final = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
)
_SIDECARS: Final = ("-wal", "-shm")


def _mode(info: os.stat_result) -> int:
    return stat.S_IMODE(info.st_mode)


def check_home(home: Path) -> Check:
    """The home is a directory of ours that the bridge can write, and private (0700).

    A home that is a file, or lies below one, and a home on a read-only file system or without
    write permission fail here, with the fix for that cause; the other checks of the home's
    files are then skipped (`home_unusable`), as their fixes (restore a backup…) would mislead.
    """
    details = {"path": str(home)}
    blocker = blocking_file(home)
    if blocker is not None:
        kind = "a file" if blocker.is_file() else "not a regular file"
        where = "" if blocker == home else f", so it cannot hold the bridge home {home}"
        return Check(
            "home",
            Status.FAIL,
            f"{blocker} is {kind}, not a directory{where}",
            fix="pass --home with a directory (or move the file away)",
            details=details,
        )
    try:
        info = home.stat()
    except FileNotFoundError:
        parent = next(p for p in home.parents if p.exists())
        reason = read_only_reason(parent)
        if reason is not None:
            return Check(
                "home",
                Status.FAIL,
                f"{home} does not exist, and its folder {parent} {reason}",
                fix=unwritable_fix(parent, reason),
                details=details,
            )
        return Check(
            "home",
            Status.WARN,
            f"{home} does not exist yet",
            fix="start the bridge once (`codedeck-bridge run`): it creates its home (mode 0700)",
            details=details,
        )
    except OSError as exc:
        return Check(
            "home",
            Status.FAIL,
            f"cannot inspect {home}: {exc.strerror}",
            fix=f"check the permissions of {home.parent}",
            details=details,
        )
    details["mode"] = f"{_mode(info):04o}"
    if not stat.S_ISDIR(info.st_mode):
        return Check(
            "home",
            Status.FAIL,
            f"{home} is not a directory",
            fix="move it away, or pass --home with another folder",
            details=details,
        )
    if info.st_uid != os.geteuid():
        return Check(
            "home",
            Status.FAIL,
            f"{home} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})",
            fix=f"run the bridge as its owner, or `chown -R {os.geteuid()} {home}`",
            details=details,
        )
    reason = read_only_reason(home)
    if reason is not None and "read-only" in reason:
        return Check(
            "home",
            Status.FAIL,
            f"{home} {reason}: the bridge cannot create its lock, database and socket there",
            fix=unwritable_fix(home, reason),
            details=details,
        )
    if _mode(info) & 0o077:
        return Check(
            "home",
            Status.FAIL,
            f"{home} is accessible to other users (mode {_mode(info):04o}); it holds the "
            "bridge key",
            fix=f"chmod 700 {home}",
            details=details,
        )
    if reason is not None:
        return Check(
            "home",
            Status.FAIL,
            f"{home} {reason}: the bridge cannot create its lock, database and socket there",
            fix=unwritable_fix(home, reason),
            details=details,
        )
    return Check("home", Status.PASS, f"{home} is private (mode 0700, yours)", details=details)


def home_unusable(home: Path) -> bool:
    """True when `home` is a file or lies below one: nothing can be checked inside it."""
    return blocking_file(home) is not None


def check_database(home: Path) -> Check:
    """bridge.db (and its -wal/-shm) are 0600 and ours, and the file passes its integrity check."""
    path = home / BRIDGE_DB_FILENAME
    details: dict[str, object] = {"path": str(path)}
    loose: list[str] = []
    for candidate in (path, *(path.with_name(path.name + s) for s in _SIDECARS)):
        try:
            info = candidate.lstat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            return Check(
                "database",
                Status.FAIL,
                f"cannot inspect {candidate}: {exc.strerror}",
                details=details,
            )
        if not stat.S_ISREG(info.st_mode):
            return Check(
                "database",
                Status.FAIL,
                f"{candidate} is not a regular file",
                fix=f"move {candidate} away; the bridge recreates what it needs",
                details=details,
            )
        if info.st_uid != os.geteuid():
            return Check(
                "database",
                Status.FAIL,
                f"{candidate} belongs to uid {info.st_uid}, not to you",
                fix=f"run the bridge as its owner, or `chown {os.geteuid()} {candidate}`",
                details=details,
            )
        if _mode(info) & 0o077:
            loose.append(f"{candidate} ({_mode(info):04o})")
    if loose:
        return Check(
            "database",
            Status.FAIL,
            "readable by other users: " + ", ".join(loose),
            fix="chmod 600 " + " ".join(item.rsplit(" (", 1)[0] for item in loose),
            details=details,
        )
    try:
        with open_readonly(home) as db:
            version = db.schema_version
    except NoDatabase:
        return Check(
            "database",
            Status.WARN,
            f"{path} does not exist yet",
            fix="start the bridge once (`codedeck-bridge run`): it creates the database",
            details=details,
        )
    except CorruptDatabase as exc:
        return Check(
            "database",
            Status.FAIL,
            str(exc),
            fix="restore bridge.db from a backup, or move it aside as the message says",
            details=details,
        )
    except StoreError as exc:  # its message says what to do
        return Check("database", Status.FAIL, str(exc), details=details)
    known = len(BRIDGE_MIGRATIONS)
    details["schemaVersion"] = version
    if version > known:
        return Check(
            "database",
            Status.FAIL,
            f"{path} has schema v{version}, newer than this build (v{known})",
            fix="upgrade codedeck-bridge",
            details=details,
        )
    note = "" if version == known else f"; the daemon migrates it to v{known} at its next start"
    return Check(
        "database",
        Status.PASS,
        f"{path} is private (0600) and intact (schema v{version}){note}",
        details=details,
    )


def check_identity(home: Path, key_file: Path | None) -> Check:
    """The bridge key is present and readable: from the key file when configured, else the store."""
    if key_file is not None:
        try:
            keypair = read_key_file(key_file)
        except IdentityError as exc:
            return Check(
                "identity",
                Status.FAIL,
                str(exc),
                fix="fix the key file, or remove the key_file setting to use the stored identity",
                details={"source": str(key_file)},
            )
        return Check(
            "identity",
            Status.PASS,
            f"{keypair.npub} (from the key file {key_file})",
            details={"npub": keypair.npub, "source": str(key_file)},
        )
    try:
        with open_readonly(home) as db:
            row = (
                db.fetchone("SELECT secret_key FROM identity WHERE id = 1")
                if db.has_table("identity")
                else None
            )
    except NoDatabase:
        return Check(
            "identity",
            Status.WARN,
            "no identity yet",
            fix="start the bridge once (`codedeck-bridge run`): it creates its key and keeps it",
        )
    except CorruptDatabase as exc:
        return Check(
            "identity",
            Status.FAIL,
            f"cannot read the stored identity: {exc}",
            fix="restore bridge.db from a backup",
        )
    except StoreError as exc:  # its message says what to do
        return Check("identity", Status.FAIL, f"cannot read the stored identity: {exc}")
    if row is None:
        return Check(
            "identity",
            Status.WARN,
            "the database holds no identity yet",
            fix="start the bridge: it creates its key at the first start",
        )
    try:
        keypair = Keypair.from_secret(bytes(row[0]))
    except (NostrKeyError, TypeError):
        return Check(
            "identity",
            Status.FAIL,
            f"{home / BRIDGE_DB_FILENAME} holds an invalid bridge key",
            fix="restore bridge.db from a backup (a new key would orphan every paired phone)",
        )
    return Check(
        "identity",
        Status.PASS,
        f"{keypair.npub} (kept in the store)",
        details={"npub": keypair.npub, "source": "store"},
    )


def claude_login_file(env: Mapping[str, str]) -> Path:
    """Where Claude Code keeps its login on Linux (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``)."""
    base = env.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    return Path(base) / ".credentials.json"


def _env_file_names(path: Path) -> tuple[set[str], str | None]:
    """The variable names set in a systemd EnvironmentFile (values are never kept)."""
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return set(), None
    except OSError as exc:
        return set(), f"cannot read {path}: {exc.strerror}"
    if _mode(info) & 0o077:
        return set(), f"{path} is readable by other users (mode {_mode(info):04o})"
    names = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        name, _, value = line.partition("=")
        name = name.strip().removeprefix("export ").strip()
        if value.strip():
            names.add(name)
    return names, None


def check_credentials(home: Path, env: Mapping[str, str]) -> Check:
    """Something lets Claude Code call a model: a Claude login, or an API key / token.

    Checked (names only, never values): ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN`` and
    ``CLAUDE_CODE_OAUTH_TOKEN`` (with ``ANTHROPIC_BASE_URL``) in this environment and in
    ``<home>/service.env`` (what the systemd unit loads), and the Claude Code login file
    (``~/.claude/.credentials.json``, or under ``$CLAUDE_CONFIG_DIR``). Provider profiles are
    not part of this build.
    """
    env_file = home / SERVICE_ENV_FILE
    file_names, file_problem = _env_file_names(env_file)
    shell = [name for name in CREDENTIAL_VARIABLES if env.get(name)]
    service = [name for name in CREDENTIAL_VARIABLES if name in file_names]
    login = claude_login_file(env)
    has_login = login.is_file() and login.stat().st_size > 0
    checked = (
        f"checked {', '.join(CREDENTIAL_VARIABLES)} in this environment and in {env_file}, "
        f"and the Claude Code login {login}"
    )
    details = {
        "environment": shell,
        "serviceEnvFile": service,
        "claudeLogin": has_login,
        "baseUrl": bool(env.get("ANTHROPIC_BASE_URL") or "ANTHROPIC_BASE_URL" in file_names),
        "checked": checked,
    }
    if file_problem:
        return Check(
            "credentials",
            Status.FAIL,
            file_problem,
            fix=f"chmod 600 {env_file}",
            details=details,
        )
    found = []
    if has_login:
        found.append(f"Claude Code login ({login})")
    if service:
        found.append(f"{', '.join(service)} in {env_file}")
    if shell:
        found.append(f"{', '.join(shell)} in this shell's environment")
    if not found:
        return Check(
            "credentials",
            Status.FAIL,
            f"no credentials for Claude Code ({checked})",
            fix=(
                "log in once with `claude` (or `claude setup-token`), or put ANTHROPIC_API_KEY=… "
                f"in {env_file} (mode 0600) for the service"
            ),
            details=details,
        )
    summary = "found " + "; ".join(found)
    if shell and not service and not has_login:
        return Check(
            "credentials",
            Status.WARN,
            summary + ": `codedeck-bridge run` from this shell sees them, the service does not",
            fix=f"for the service, put them in {env_file} (mode 0600)",
            details=details,
        )
    return Check("credentials", Status.PASS, summary, details=details)
