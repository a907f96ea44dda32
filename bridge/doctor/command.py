"""``codedeck-bridge doctor``: run every check, print a pass/fail line each, exit 1 on a failure.

Checks, in order (names for ``--skip`` in brackets): the settings [config]; the home directory
[home] and database [database] permissions; the identity [identity]; whether the daemon runs
[daemon]; each relay [relay]: connect, REQ, EOSE and their round-trip times (the embedded relay
when none is configured and the daemon runs); where the embedded relay listens and whether its
LAN address answers [lan]; the Claude Code CLI and its version [claude]; whether each configured
ACP agent (OpenCode, ``[agents.<id>]``) starts [agent]; credentials [credentials];
the clock against a relay [clock]; the relay registration endpoint [registration].

The doctor writes nothing and publishes nothing; it reads the database read-only and talks to the
daemon only through its control socket (``status``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

from bridge.config import ConfigError, Settings, default_home, load_settings
from bridge.control.client import ControlClient, ControlError, DaemonNotRunning
from bridge.control.server import control_socket_path
from bridge.control.terminal_text import safe_text
from bridge.doctor.agents import check_agents
from bridge.doctor.claude import check_claude
from bridge.doctor.local import (
    check_credentials,
    check_database,
    check_home,
    check_identity,
    home_unusable,
)
from bridge.doctor.model import Check, Status
from bridge.doctor.relays import RelayProbe, check_clock, check_lan, check_relay, probe_relay
from bridge.doctor.sandbox import check_sandbox_support
from store.errors import StoreError
from store.lock import read_lock_holder

__all__ = [
    "CHECK_NAMES",
    "add_doctor_command",
    "render_report",
    "run_checks",
    "run_doctor_command",
]

CHECK_NAMES: Final = (
    "config",
    "home",
    "database",
    "identity",
    "daemon",
    "relay",
    "lan",
    "claude",
    "agent",
    "credentials",
    "sandbox",
    "clock",
    "registration",
)
EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
_LABELS: Final = {
    Status.PASS: "PASS",
    Status.WARN: "WARN",
    Status.FAIL: "FAIL",
    Status.SKIP: "SKIP",
}


async def _daemon(home: Path) -> tuple[Check, dict[str, Any] | None]:
    try:
        if not control_socket_path(home).exists():
            raise DaemonNotRunning(home, control_socket_path(home), stale=False)
        async with await ControlClient.connect(home) as client:
            status: Any = await client.status()
    except DaemonNotRunning:
        try:
            holder = read_lock_holder(home)
        except StoreError:
            holder = None
        if holder is not None:
            return (
                Check(
                    "daemon",
                    Status.WARN,
                    f"a codedeck-bridge (pid {holder.pid or '?'}) holds {home} but does not answer "
                    "on its control socket",
                    "it is starting, stopping or stuck: check its log (journalctl --user -u "
                    "codedeck-bridge)",
                ),
                None,
            )
        return (
            Check(
                "daemon",
                Status.WARN,
                "not running",
                "start it: `codedeck-bridge run`, or `systemctl --user start codedeck-bridge`",
            ),
            None,
        )
    except ControlError as exc:
        return Check("daemon", Status.FAIL, str(exc), "check the daemon's log"), None
    if not isinstance(status, dict):
        return Check("daemon", Status.FAIL, "the daemon's status answer is malformed"), None
    summary = (
        f"running (pid {safe_text(status.get('pid'))}, version {safe_text(status.get('version'))},"
        f" since {safe_text(status.get('startedAt'))})"
    )
    return Check("daemon", Status.PASS, summary, details={"pid": status.get("pid")}), status


async def run_checks(
    home: Path,
    settings: Settings | None,
    config_error: str | None,
    env: Mapping[str, str],
    *,
    timeout: float = 5.0,
    skip: Sequence[str] = (),
) -> list[Check]:
    """Every check, in report order (see the module docstring)."""
    checks: list[Check] = []

    unusable = home_unusable(home)
    inside = ("config", "database", "identity", "daemon", "credentials")

    def want(name: str) -> bool:
        return name not in skip and not (unusable and name in inside)

    def skipped(*names: str) -> None:
        # Their failures (and fixes) would only repeat that the home is no directory.
        for name in names:
            if unusable and name not in skip:
                checks.append(Check(name, Status.SKIP, f"not checked: {home} is not a directory"))

    skipped("config")
    if want("config"):
        if settings is None:
            checks.append(
                Check(
                    "config",
                    Status.FAIL,
                    config_error or "invalid settings",
                    "fix the setting named (`codedeck-bridge config show` shows where each comes "
                    "from)",
                )
            )
        else:
            source = settings.config_file if settings.config_file.exists() else None
            checks.append(
                Check(
                    "config",
                    Status.PASS,
                    f"settings are valid (config file: {source or 'none, defaults'})",
                )
            )
    if want("home"):
        checks.append(check_home(home))
    skipped("database", "identity", "daemon", "credentials")
    if want("database"):
        checks.append(await asyncio.to_thread(check_database, home))
    if want("identity"):
        key_file = settings.key_file if settings is not None else None
        checks.append(await asyncio.to_thread(check_identity, home, key_file))
    status: dict[str, Any] | None = None
    if want("daemon") or want("relay") or want("lan"):
        daemon_check, status = await _daemon(home)
        if want("daemon"):
            checks.append(daemon_check)
    probes: list[RelayProbe] = []
    if settings is not None and (want("relay") or want("clock")):
        urls = list(settings.relays)
        if settings.uses_embedded_relay and status is not None and status.get("embeddedRelay"):
            urls = [str(status["embeddedRelay"])]
        if urls:
            probes = list(
                await asyncio.gather(*(probe_relay(url, timeout=timeout) for url in urls))
            )
            if want("relay"):
                checks.extend(check_relay(probe) for probe in probes)
        elif want("relay"):
            checks.append(
                Check(
                    "relay",
                    Status.SKIP,
                    "no relay is configured: the daemon serves an embedded relay, which runs only "
                    "while the daemon does (start it and run doctor again)",
                )
            )
    if settings is not None and want("lan"):
        if settings.uses_embedded_relay:
            host, port = settings.embedded_relay
            scheme = "wss" if settings.embedded_relay_cert is not None else "ws"
            announced = status.get("embeddedRelay") if status is not None else None
            if isinstance(announced, str):
                # What the running daemon announces to phones (its flags may differ from ours).
                parts = urlsplit(announced)
                with contextlib.suppress(ValueError):
                    host, port = parts.hostname or host, parts.port or port
                scheme = "wss" if parts.scheme == "wss" else "ws"
            checks.append(
                await check_lan(host, port, daemon_running=status is not None, scheme=scheme)
            )
        else:
            checks.append(
                Check("lan", Status.SKIP, "relays are configured; the embedded relay is not used")
            )
    if want("claude"):
        checks.append(await asyncio.to_thread(check_claude, env))
    if want("agent") and settings is not None:
        checks.extend(await check_agents(settings.agents, env))
    if want("credentials"):
        checks.append(check_credentials(home, env))
    if want("sandbox") and settings is not None:
        checks.append(await asyncio.to_thread(check_sandbox_support, settings, env))
    if want("clock"):
        checks.append(check_clock(probes))
    if want("registration"):
        checks.append(
            Check(
                "registration",
                Status.SKIP,
                "this build has no relay registration setting: register the bridge and its phones "
                "on a private relay with `codedeck-relaypolicy register` (deploy/relay/README.md)",
            )
        )
    return checks


def render_report(home: Path, checks: Sequence[Check], out: TextIO) -> None:
    """The text report: one line per check, its fix indented below a failure or warning."""
    out.write(f"codedeck-bridge doctor — home {home}\n")
    width = max((len(c.name) for c in checks), default=0)
    for check in checks:
        out.write(f"  {_LABELS[check.status]}  {check.name:<{width}}  {check.summary}\n")
        if check.fix and check.status in (Status.FAIL, Status.WARN):
            out.write(f"  {'':4}  {'':<{width}}  fix: {check.fix}\n")
    failed = sum(1 for c in checks if c.status is Status.FAIL)
    warned = sum(1 for c in checks if c.status is Status.WARN)
    if failed:
        out.write(f"{failed} check(s) failed, {warned} warning(s).\n")
    elif warned:
        out.write(f"No failure; {warned} warning(s).\n")
    else:
        out.write("Everything checked is fine.\n")


def add_doctor_command(sub: Any) -> None:
    """Register ``doctor`` on ``build_parser()``'s sub-parsers."""
    doctor = sub.add_parser(
        "doctor",
        help="check the installation, relays, Claude Code and credentials; say how to fix problems",
        description=(
            "Check this installation and print one line per check with a fix for each failure. "
            "Exit status 1 when a check fails. Writes nothing and publishes nothing."
        ),
    )
    doctor.add_argument(
        "--home",
        metavar="DIR",
        help="the bridge's home directory (default: $CODEDECK_HOME or ~/.codedeck)",
    )
    doctor.add_argument("--json", action="store_true", help="print the checks as one JSON object")
    doctor.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds to wait for each relay (default 5)",
    )
    doctor.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=CHECK_NAMES,
        metavar="CHECK",
        help=f"leave a check out; repeat for several ({', '.join(CHECK_NAMES)})",
    )


def run_doctor_command(args: argparse.Namespace, *, env: Mapping[str, str] | None = None) -> int:
    """Run ``doctor``; returns the exit status."""
    env = os.environ if env is None else env
    if not 0.1 <= args.timeout <= 120:
        print(
            "codedeck-bridge doctor: --timeout must be between 0.1 and 120 seconds", file=sys.stderr
        )
        return EXIT_USAGE
    settings: Settings | None
    try:
        settings = load_settings(flags={"home": args.home}, env=env)
        config_error = None
        home = settings.home
    except (ConfigError, OSError) as exc:  # OSError: e.g. the home is a file
        settings = None
        config_error = str(exc) if isinstance(exc, ConfigError) else f"cannot read: {exc}"
        home = Path(os.path.expanduser(args.home)).absolute() if args.home else default_home(env)
    checks = asyncio.run(
        run_checks(home, settings, config_error, env, timeout=args.timeout, skip=args.skip)
    )
    failed = any(c.status is Status.FAIL for c in checks)
    if args.json:
        body = {"ok": not failed, "home": str(home), "checks": [c.as_json() for c in checks]}
        sys.stdout.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    else:
        render_report(home, checks, sys.stdout)
    return EXIT_FAILURE if failed else EXIT_OK
