"""``codedeck-bridge service install|uninstall|show``: the CLI over `bridge.service.systemd`.

``uninstall`` ends the sessions too. The unit's ``KillMode=process`` lets sessions outlive a
stop of the daemon (that is what keeps them across restarts and upgrades), so removing the
service without closing them would leave their hosts running with no daemon to adopt them. In
order: every session of the service's home is closed (through the daemon's control socket when
it answers, else on the store and the hosts directly: :mod:`bridge.runtime.hosts.close`);
the service is stopped, disabled and its unit removed; then the same close runs again, now with
no daemon, to end what started in between and stop any host still alive under the home. With
``--unit-dir`` only the file is removed: systemd and the sessions are left alone; when no unit
is installed, the sessions are left alone too (a bridge on that home is not the service). The home is
``--home``, else the one the installed unit's ``ExecStart=`` names, else the default home of the
account. As root for a ``--system`` unit, the closing runs as the unit's account (the home and
its files are that account's).

Exit status: 0 when everything asked for was done; 1 when a step could not be done (the output
says which, and the commands to finish by hand); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from bridge.config import DEFAULT_HOME, default_home
from bridge.control.client import ControlError
from bridge.records import record
from bridge.runtime.hosts.close import (
    CLOSE_WAIT,
    ClosedSessions,
    close_sessions,
    closed_lines,
)
from bridge.service.systemd import (
    Outcome,
    ServiceError,
    Systemd,
    install,
    installation_command,
    uninstall,
    unit_directory,
)
from bridge.service.units import (
    MARKER,
    SYSTEM_UNIT,
    USER_UNIT,
    UnitSpec,
    render_unit,
    unit_home,
)

__all__ = ["SessionCloser", "add_service_commands", "close_every_session", "run_service_command"]

SessionCloser = Callable[[Path, "str | None"], ClosedSessions]
"""(bridge home, account to run as or None) → what was closed; raises `ServiceError`."""

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2


class _UsageError(ServiceError):
    """A bad combination of options (exit 2)."""


def add_service_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``service install|uninstall|show`` on ``build_parser()``'s sub-parsers."""
    service = sub.add_parser(
        "service",
        help="install or remove the systemd service",
        description=(
            "Run the bridge as a systemd service: a user unit (systemctl --user) on a dev "
            "machine, or a system unit with User= on a headless server."
        ),
    )
    actions = service.add_subparsers(dest="service_action", metavar="ACTION", required=True)
    for action, text in (
        ("install", "write the unit for this installation, reload systemd, enable and start it"),
        (
            "uninstall",
            "close every session, stop and disable the service, remove its unit, and stop any "
            "session host left",
        ),
        ("show", "print the unit that `install` would write"),
    ):
        parser = actions.add_parser(action, help=text, description=text[0].upper() + text[1:] + ".")
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument(
            "--user",
            dest="scope",
            action="store_const",
            const="user",
            help="a user unit, for systemctl --user (the default)",
        )
        scope.add_argument(
            "--system",
            dest="scope",
            action="store_const",
            const="system",
            help="a system unit codedeck-bridge@ACCOUNT (needs root), for headless servers",
        )
        parser.set_defaults(scope="user")
        parser.add_argument(
            "--run-as",
            metavar="ACCOUNT",
            help="with --system: the account the bridge runs as (default: $SUDO_USER or you)",
        )
        if action == "show":
            _add_unit_options(parser)
            continue
        parser.add_argument(
            "--unit-dir",
            metavar="DIR",
            help="write/remove the unit file in DIR and leave systemd alone"
            + (" (and the sessions)" if action == "uninstall" else ""),
        )
        if action == "uninstall":
            parser.add_argument(
                "--home",
                metavar="DIR",
                help="the bridge home whose sessions to close (default: the one the installed "
                "unit runs with, else $CODEDECK_HOME or ~/.codedeck)",
            )
        parser.add_argument(
            "--force",
            action="store_true",
            help="overwrite or remove a unit file that codedeck-bridge did not write",
        )
        if action == "install":
            _add_unit_options(parser)
            parser.add_argument(
                "--no-enable",
                dest="enable",
                action="store_false",
                help="only write the unit and reload systemd; do not enable or start it",
            )


def _add_unit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home",
        metavar="DIR",
        help="the bridge's home for the service (default: $CODEDECK_HOME or ~/.codedeck)",
    )
    parser.add_argument(
        "--no-path",
        dest="keep_path",
        action="store_false",
        help="do not copy this shell's PATH into the unit (sessions then get systemd's PATH)",
    )
    parser.add_argument(
        "--credential",
        metavar="FILE",
        help="have systemd pass FILE (an nsec) to the daemon as its key (LoadCredential=)",
    )


def _account(args: argparse.Namespace, env: Mapping[str, str]) -> str | None:
    if args.scope != "system":
        if args.run_as:
            raise _UsageError("--run-as is for --system units; a user unit runs as you")
        return None
    account = args.run_as or env.get("SUDO_USER") or pwd.getpwuid(os.getuid()).pw_name
    try:
        entry = pwd.getpwnam(account)
    except KeyError:
        raise _UsageError(f"--run-as: there is no account {account!r} on this machine") from None
    if entry.pw_uid == 0:
        raise _UsageError(
            "the bridge does not run as root (its sessions would run as root too); "
            "pass --run-as ACCOUNT with the account whose workspaces the sessions use"
        )
    return account


def _spec(
    args: argparse.Namespace, env: Mapping[str, str], account: str | None
) -> tuple[UnitSpec, Path]:
    """The unit for these options, and the bridge home the service will use."""
    command, pythonpath = installation_command()
    given = Path(os.path.expanduser(args.home)).absolute() if args.home else None
    if args.scope == "system":
        # The account's own default home unless --home says otherwise (then for every instance).
        assert account is not None
        home = given or Path(pwd.getpwnam(account).pw_dir) / ".codedeck"
        unit_home = given
    else:
        home = given or default_home(env)
        unit_home = None if home == Path(os.path.expanduser(DEFAULT_HOME)).absolute() else home
    credential = None
    if args.credential:
        credential = Path(os.path.expanduser(args.credential)).absolute()
        if not credential.is_file():
            raise _UsageError(f"--credential: {credential} is not a file")
    spec = UnitSpec(
        scope=args.scope,
        command=command,
        home=unit_home,
        path=env.get("PATH") if args.keep_path else None,
        pythonpath=pythonpath,
        credential=credential,
    )
    return spec, home


def _unseen_settings(env: Mapping[str, str], home: Path) -> list[str]:
    """A note for CODEDECK_* settings of this shell, which the service will not inherit."""
    names = sorted(n for n in env if n.startswith("CODEDECK_") and n != "CODEDECK_HOME" and env[n])
    if not names:
        return []
    return [
        f"Note: {', '.join(names)} {'is' if len(names) == 1 else 'are'} set in this shell but the "
        f"service does not inherit {'it' if len(names) == 1 else 'them'}: put the setting(s) in "
        f"{home / 'config.toml'} (see deploy/config.example.toml)."
    ]


# --- closing the sessions (uninstall) ----------------------------------------------------------


@record
class _LeaveSessions:
    """``uninstall`` does not close the sessions, for `reason`."""

    reason: str


def _uninstall_home(
    args: argparse.Namespace, env: Mapping[str, str], account: str | None, unit_dir: Path | None
) -> Path | _LeaveSessions:
    """The home whose sessions ``uninstall`` closes, or why it leaves them alone.

    ``--home``, else the installed unit's ``--home``, else the account's default home. Nothing
    is closed with ``--unit-dir``, or when no unit is installed (the bridge running there, if
    any, is not the service). A unit that is not ours stops the uninstall before anything is
    closed (``uninstall`` refuses to remove it).

    Raises:
        ServiceError: the installed unit was not written by codedeck-bridge (without --force).
    """
    if unit_dir is not None:
        return _LeaveSessions("--unit-dir")
    name = SYSTEM_UNIT if args.scope == "system" else USER_UNIT
    path = unit_directory(args.scope, env) / name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _LeaveSessions(f"no {name} is installed")
    except (OSError, UnicodeDecodeError):
        text = ""
    if text and MARKER not in text and not args.force:
        raise ServiceError(
            f"{path} was not written by codedeck-bridge; remove it yourself or pass --force"
        )
    if args.home:
        return Path(os.path.expanduser(args.home)).absolute()
    installed = unit_home(text)
    if installed is not None:
        return installed
    if account is not None:
        return Path(pwd.getpwnam(account).pw_dir) / ".codedeck"
    return default_home(env)


def close_every_session(home: Path, account: str | None) -> ClosedSessions:
    """Close every session of `home` (`bridge.runtime.hosts.close.close_sessions`).

    As root with an `account` (a ``--system`` unit), it runs ``codedeck-bridge sessions close
    --all`` as that account: the home refuses files and locks of another owner.

    Raises:
        ServiceError: the sessions could not be closed (the message says why).
    """
    if account is not None and os.geteuid() == 0:
        return _close_as(account, home)
    try:
        return asyncio.run(close_sessions(home, None))
    except ControlError as exc:
        raise ServiceError(str(exc)) from None


def _close_as(account: str, home: Path) -> ClosedSessions:
    entry = pwd.getpwnam(account)
    command, pythonpath = installation_command()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": entry.pw_dir,
        "USER": account,
        "LOGNAME": account,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    argv = [*command, "sessions", "close", "--all", "--json", "--home", str(home)]
    try:
        done = subprocess.run(
            argv,
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=os.getgrouplist(account, entry.pw_gid),
            env=env,
            cwd="/",
            capture_output=True,
            text=True,
            timeout=CLOSE_WAIT + 60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ServiceError(f"cannot run `sessions close` as {account}: {exc}") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        detail = lines[-1].removeprefix("codedeck-bridge: ") if lines else f"exit {done.returncode}"
        raise ServiceError(detail)
    try:
        body = json.loads(done.stdout)
        closed = tuple(str(s) for s in body["closed"])
        return ClosedSessions(closed, bool(body["daemon"]), int(body["hostsStopped"]))
    except (ValueError, KeyError, TypeError):
        raise ServiceError(f"`sessions close` as {account} answered something else") from None


def _close_step(
    close: SessionCloser, home: Path | _LeaveSessions, account: str | None, *, first: bool
) -> Outcome:
    """One round of closing for ``uninstall`` (before and after the service is stopped)."""
    outcome = Outcome()
    if isinstance(home, _LeaveSessions):
        if first:
            outcome.lines.append(f"The sessions were left alone ({home.reason}).")
        return outcome
    try:
        result = close(home, account)
    except ServiceError as exc:
        if first:
            outcome.lines.append(
                f"Could not close the sessions of {home} first ({exc}); trying again once the "
                "service has stopped."
            )
        else:
            outcome.lines.append(f"Could not close the sessions of {home}: {exc}")
            as_account = f"sudo -u {account} " if account is not None and os.geteuid() == 0 else ""
            outcome.todo.append(f"{as_account}codedeck-bridge sessions close --all --home {home}")
        return outcome
    if first or result.closed or result.hosts_stopped:
        outcome.lines.extend(closed_lines(result, home))
    else:
        outcome.lines.append(f"No session and no session host left under {home}.")
    return outcome


def run_service_command(
    args: argparse.Namespace,
    *,
    systemd: Systemd | None = None,
    env: Mapping[str, str] | None = None,
    close: SessionCloser | None = None,
) -> int:
    """Run ``service install|uninstall|show``; returns the exit status.

    Args:
        args: the parsed command line.
        systemd: how to reach systemd (detected when None).
        env: the environment (``os.environ`` when None).
        close: how ``uninstall`` closes the sessions of a home (`close_every_session`).
    """
    env = os.environ if env is None else env
    close = close_every_session if close is None else close
    try:
        account = _account(args, env)
        if args.service_action == "show":
            spec, _ = _spec(args, env, account)
            sys.stdout.write(render_unit(spec))
            return EXIT_OK
        systemd = systemd if systemd is not None else Systemd.detect()
        unit_dir = Path(os.path.expanduser(args.unit_dir)).absolute() if args.unit_dir else None
        if args.service_action == "install":
            spec, home = _spec(args, env, account)
            outcome = install(
                spec,
                unit_dir=unit_dir,
                enable=args.enable,
                force=args.force,
                account=account,
                systemd=systemd,
                env=env,
                bridge_home=home,
            )
            outcome.lines.extend(_unseen_settings(env, home))
        else:
            sessions_home = _uninstall_home(args, env, account, unit_dir)
            before = _close_step(close, sessions_home, account, first=True)
            outcome = uninstall(
                args.scope,
                unit_dir=unit_dir,
                force=args.force,
                account=account,
                systemd=systemd,
                env=env,
            )
            after = _close_step(close, sessions_home, account, first=False)
            outcome.lines[:0] = before.lines
            outcome.lines.extend(after.lines)
            outcome.todo.extend(after.todo)
    except _UsageError as exc:
        print(f"codedeck-bridge service: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ServiceError as exc:
        print(f"codedeck-bridge service: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    for line in outcome.lines:
        print(line)
    if not outcome.complete:
        print("To finish, run:")
        for command in outcome.todo:
            print(f"  {command}")
        return EXIT_FAILURE
    return EXIT_OK
