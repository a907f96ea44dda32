"""``codedeck-bridge service install|uninstall|show``: the CLI over `bridge.service.systemd`.

Exit status: 0 when everything asked for was done; 1 when a step could not be done (the output
says which, and the commands to finish by hand); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from bridge.config import DEFAULT_HOME, default_home
from bridge.service.systemd import (
    ServiceError,
    Systemd,
    install,
    installation_command,
    uninstall,
)
from bridge.service.units import UnitSpec, render_unit

__all__ = ["add_service_commands", "run_service_command"]

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
        ("uninstall", "stop and disable the service and remove its unit"),
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
            help="write/remove the unit file in DIR and leave systemd alone",
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


def run_service_command(
    args: argparse.Namespace,
    *,
    systemd: Systemd | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Run ``service install|uninstall|show``; returns the exit status."""
    env = os.environ if env is None else env
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
            outcome = uninstall(
                args.scope,
                unit_dir=unit_dir,
                force=args.force,
                account=account,
                systemd=systemd,
                env=env,
            )
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
