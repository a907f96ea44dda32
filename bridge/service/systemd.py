"""Installing and removing the units: this installation's command, and talking to systemd.

``install`` writes the unit with the ``ExecStart`` of the installation that runs it (this
console script, or ``<python> -m bridge`` with the ``PYTHONPATH`` a source checkout needs), then
``systemctl daemon-reload`` and, unless told not to, ``systemctl enable --now``. Where systemd is
not running (no ``/run/systemd/system``, or no ``systemctl``) it writes the file if it can and
returns the commands to finish by hand; with a ``unit_dir`` it only writes the file and never
touches systemd (tests, packaging). ``uninstall`` reverses it. Files without `MARKER` (someone
else's unit of the same name) are neither overwritten nor removed unless forced.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import bridge
from bridge.service.units import MARKER, SYSTEM_UNIT, USER_UNIT, Scope, UnitSpec, render_unit
from store.errors import StoreError
from store.lock import read_lock_holder

__all__ = [
    "Outcome",
    "ServiceError",
    "Systemd",
    "install",
    "installation_command",
    "uninstall",
    "unit_directory",
]


class ServiceError(Exception):
    """The install/uninstall cannot go on; the message says what to do."""


def _importable_without_pythonpath(python: str) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        done = subprocess.run(
            [python, "-c", "import bridge.cli.main"],
            cwd="/",
            env=env,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def installation_command(
    argv0: str | None = None, executable: str | None = None
) -> tuple[tuple[str, ...], str | None]:
    """The argv that starts this installation's ``codedeck-bridge``, and a PYTHONPATH if needed.

    The console script when we were started through it (its absolute path, symlinks kept: a
    venv's ``bin/`` must stay the venv's); otherwise ``<python> -m bridge``, plus the folder
    holding the ``bridge`` package as PYTHONPATH when that Python cannot import it by itself
    (a source checkout that was not pip-installed).
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    script = Path(argv0)
    if script.name == "codedeck-bridge" and script.is_file():
        return (str(script.absolute()),), None
    if not executable:
        raise ServiceError("cannot tell which Python runs this program; run it from its venv")
    python = str(Path(executable).absolute())
    if _importable_without_pythonpath(python):
        return (python, "-m", "bridge"), None
    package_root = Path(bridge.__file__).resolve().parent.parent  # the folder holding bridge/
    return (python, "-m", "bridge"), str(package_root)


def unit_directory(scope: Scope, env: Mapping[str, str]) -> Path:
    """Where systemd looks for units we write: ``~/.config/systemd/user`` or /etc/systemd/system."""
    if scope == "system":
        return Path("/etc/systemd/system")
    config = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "systemd" / "user"


# --- systemd access -----------------------------------------------------------------------------

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)


@dataclass
class Systemd:
    """How to reach systemd (injectable for tests).

    Attributes:
        systemctl: the ``systemctl`` binary, or None when it is missing.
        booted: True when systemd is the running init (``/run/systemd/system`` exists).
        run: runs a command and returns its outcome.
    """

    systemctl: str | None
    booted: bool
    run: Runner = _run

    @classmethod
    def detect(cls) -> Systemd:
        return cls(shutil.which("systemctl"), Path("/run/systemd/system").is_dir())

    @property
    def usable(self) -> bool:
        return self.systemctl is not None and self.booted

    def why_not(self) -> str:
        if self.systemctl is None:
            return "systemctl is not installed"
        return "systemd is not running on this machine (no /run/systemd/system)"

    def call(self, scope: Scope, *args: str) -> tuple[bool, str]:
        assert self.systemctl is not None
        argv = [self.systemctl, *(["--user"] if scope == "user" else []), *args]
        try:
            done = self.run(argv)
        except (OSError, subprocess.SubprocessError) as exc:
            return False, str(exc)
        detail = (done.stderr or done.stdout or "").strip().splitlines()
        return done.returncode == 0, detail[-1] if detail else f"exit status {done.returncode}"


# --- install / uninstall ------------------------------------------------------------------------


@dataclass
class Outcome:
    """What `install` / `uninstall` did, for the CLI to print."""

    lines: list[str] = field(default_factory=list)
    todo: list[str] = field(default_factory=list)
    """Commands the user must run by hand (a step could not be done here)."""

    @property
    def complete(self) -> bool:
        return not self.todo


def _systemctl_text(scope: Scope, *args: str) -> str:
    prefix = "systemctl --user" if scope == "user" else "sudo systemctl"
    return f"{prefix} {' '.join(args)}"


def _write_unit(path: Path, text: str, *, force: bool) -> str:
    """Write atomically; returns "written", "updated" or "unchanged"."""
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    except OSError as exc:
        raise ServiceError(f"cannot read {path}: {exc.strerror}") from None
    if old is not None and MARKER not in old and not force:
        raise ServiceError(
            f"{path} exists and was not written by codedeck-bridge; move it away or pass --force"
        )
    if old == text:
        return "unchanged"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except PermissionError:
        hint = " (system units need root: run it with sudo)" if str(path).startswith("/etc") else ""
        raise ServiceError(f"cannot write {path}: permission denied{hint}") from None
    except OSError as exc:
        raise ServiceError(f"cannot write {path}: {exc.strerror}") from None
    return "written" if old is None else "updated"


def _instance(scope: Scope, account: str | None) -> str:
    return USER_UNIT if scope == "user" else f"codedeck-bridge@{account}.service"


def install(
    spec: UnitSpec,
    *,
    unit_dir: Path | None,
    enable: bool,
    force: bool,
    account: str | None,
    systemd: Systemd,
    env: Mapping[str, str],
    bridge_home: Path,
) -> Outcome:
    """Write the unit, reload systemd, enable and start it (see the module docstring).

    Raises:
        ServiceError: the unit cannot be written (the message says why and what to do).
    """
    outcome = Outcome()
    name = SYSTEM_UNIT if spec.scope == "system" else USER_UNIT
    directory = unit_dir if unit_dir is not None else unit_directory(spec.scope, env)
    path = directory / name
    state = _write_unit(path, render_unit(spec), force=force)
    outcome.lines.append(f"{path}: {state}")
    instance = _instance(spec.scope, account)
    if unit_dir is not None:
        outcome.lines.append("systemd was left alone (--unit-dir).")
        return outcome
    steps: list[tuple[str, ...]] = [("daemon-reload",)]
    if enable:
        steps.append(("enable", "--now", instance))
    if not systemd.usable:
        outcome.lines.append(f"Not reloading systemd: {systemd.why_not()}.")
        outcome.todo = [_systemctl_text(spec.scope, *step) for step in steps]
        return outcome
    for index, step in enumerate(steps):
        ok, detail = systemd.call(spec.scope, *step)
        if not ok:
            outcome.lines.append(f"`{_systemctl_text(spec.scope, *step)}` failed: {detail}")
            if spec.scope == "user":
                outcome.lines.append(
                    "If there is no user manager (e.g. over plain ssh/su), log in once through a "
                    "session, or run `loginctl enable-linger $USER`."
                )
            outcome.todo = [_systemctl_text(spec.scope, *s) for s in steps[index:]]
            return outcome
        outcome.lines.append(f"ran `{_systemctl_text(spec.scope, *step)}`")
    if enable:
        outcome.lines.append(f"{instance} is enabled and started.")
        if spec.scope == "user":
            outcome.lines.extend(_linger_hint(systemd, env))
    else:
        outcome.lines.append(
            f"Start it with `{_systemctl_text(spec.scope, 'enable', '--now', instance)}`."
        )
    outcome.lines.extend(_running_hint(bridge_home))
    return outcome


def _linger_hint(systemd: Systemd, env: Mapping[str, str]) -> list[str]:
    user = env.get("USER") or pwd.getpwuid(os.getuid()).pw_name
    try:
        done = systemd.run(["loginctl", "show-user", user, "--property=Linger", "--value"])
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode == 0 and done.stdout.strip() == "no":
        return [
            "It runs while you are logged in. To keep it running after logout and start it at "
            f"boot: `loginctl enable-linger {user}`."
        ]
    return []


def _running_hint(home: Path) -> list[str]:
    try:
        holder = read_lock_holder(home)
    except StoreError:
        return []
    if holder is None:
        return []
    return [
        f"Note: a codedeck-bridge (pid {holder.pid or 'unknown'}) already uses {home}; if it is "
        "not the service, stop it, or the service cannot start (one daemon per home)."
    ]


def uninstall(
    scope: Scope,
    *,
    unit_dir: Path | None,
    force: bool,
    account: str | None,
    systemd: Systemd,
    env: Mapping[str, str],
) -> Outcome:
    """Stop and disable the service, remove the unit file, reload systemd.

    Raises:
        ServiceError: the file is not ours (without --force) or cannot be removed.
    """
    outcome = Outcome()
    name = SYSTEM_UNIT if scope == "system" else USER_UNIT
    directory = unit_dir if unit_dir is not None else unit_directory(scope, env)
    path = directory / name
    instance = _instance(scope, account)
    managed = unit_dir is None and systemd.usable
    if unit_dir is None and not systemd.usable:
        outcome.lines.append(f"Not calling systemd: {systemd.why_not()}.")
    if managed:
        ok, detail = systemd.call(scope, "disable", "--now", instance)
        outcome.lines.append(
            f"ran `{_systemctl_text(scope, 'disable', '--now', instance)}`"
            if ok
            else f"`{_systemctl_text(scope, 'disable', '--now', instance)}`: {detail}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        outcome.lines.append(f"{path} does not exist: nothing to remove.")
        text = None
    except OSError as exc:
        raise ServiceError(f"cannot read {path}: {exc.strerror}") from None
    if text is not None:
        if MARKER not in text and not force:
            raise ServiceError(
                f"{path} was not written by codedeck-bridge; remove it yourself or pass --force"
            )
        others = _other_instances(directory, instance) if scope == "system" else []
        if others:
            outcome.lines.append(
                f"Kept {path}: other instances still use it ({', '.join(others)}); "
                "uninstall them first."
            )
        else:
            try:
                path.unlink()
            except PermissionError:
                hint = " (run it with sudo)" if str(path).startswith("/etc") else ""
                raise ServiceError(f"cannot remove {path}: permission denied{hint}") from None
            except OSError as exc:
                raise ServiceError(f"cannot remove {path}: {exc.strerror}") from None
            outcome.lines.append(f"{path}: removed")
    if managed:
        ok, detail = systemd.call(scope, "daemon-reload")
        if ok:
            outcome.lines.append(f"ran `{_systemctl_text(scope, 'daemon-reload')}`")
        else:
            outcome.lines.append(f"`{_systemctl_text(scope, 'daemon-reload')}` failed: {detail}")
            outcome.todo = [_systemctl_text(scope, "daemon-reload")]
    elif unit_dir is None:
        outcome.todo = [
            _systemctl_text(scope, "disable", "--now", instance),
            _systemctl_text(scope, "daemon-reload"),
        ]
    return outcome


def _other_instances(directory: Path, instance: str) -> list[str]:
    """Enabled instances of the template other than `instance` (their WantedBy symlinks)."""
    found: set[str] = set()
    for wants in directory.glob("*.wants"):
        for link in wants.glob("codedeck-bridge@*.service"):
            if link.name != instance:
                found.add(link.name)
    return sorted(found)
