"""The ``codedeck-bridge`` command line.

Commands: ``run`` (the daemon); ``status``, ``pair``, ``phones``, ``unpair`` and ``sessions``
(through the running daemon's control socket); ``sessions close`` (through the daemon, or on the
store and the session hosts directly when none runs); ``decisions``, ``config show`` and ``keys
show`` (offline: they read the configuration and the database read-only, daemon running or
not); ``doctor`` (checks with a fix for each failure); ``service install|uninstall|show``
(systemd).

Sessions outlive the daemon (each runs in a session host, see ``bridge.host``). ``run`` decides
what its own stop does to them: under systemd it leaves them running for the next start to
adopt (a stop is usually a restart or an upgrade); in the foreground Ctrl-C closes their hosts,
which stops their agents (the sessions stay and resume at the next start), unless
``--keep-sessions``; ``--close-sessions`` forces that under systemd too. ``sessions close`` is
what ends a session for good.

``--home`` may come before the command (``codedeck-bridge --home X status``) or after it; after
wins when both are given. A home that is a file, or a missing home given to a command that reads
an existing bridge, is refused before the command runs (`bridge.cli.home`).

``decisions`` reads the database directly rather than through the daemon: the audit log must be
readable while the daemon is stopped (after an incident, say), and WAL lets it read a running
daemon's committed rows without disturbing it, so one path serves both cases.

User errors (a bad flag, an invalid setting, a second daemon on the same home) are reported in
one line on stderr with what to do, and exit with a status scripts can rely on:

- 0: success;
- 1: the operation failed (for example the daemon stopped on an error);
- 2: usage or configuration error;
- 130: interrupted (Ctrl-C) while a command waited.

No Python traceback is shown for a user error; unexpected errors are logged with their traceback,
because those are bugs to report.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import gc
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from bridge import __version__
from bridge.cli.commands import CONTROL_COMMANDS, add_control_commands, run_control_command
from bridge.cli.home import home_error, home_source, missing_home_message
from bridge.config import ConfigError, Settings, default_home, describe, load_settings
from bridge.control.client import ControlClient, ControlError, DaemonNotRunning, not_running_message
from bridge.control.terminal_text import safe_text
from bridge.doctor.command import add_doctor_command, run_doctor_command
from bridge.logs import LOG_FORMATS, configure_logging
from bridge.runtime.hosts.close import run_sessions_close
from bridge.service import add_service_commands, run_service_command

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
DEFAULT_DECISIONS = 50

log = logging.getLogger("bridge")


def _add_home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home",
        metavar="DIR",
        help="the bridge's home directory (default: $CODEDECK_HOME or ~/.codedeck)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with one sub-command per thing a user does."""
    parser = argparse.ArgumentParser(
        prog="codedeck-bridge",
        description=(
            "Drive Claude Code sessions on this machine from the CodeDeck phone app, "
            "over Nostr relays, end-to-end encrypted."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # Its own dest: a sub-command's --home (default None) would overwrite a shared one.
    parser.add_argument(
        "--home",
        dest="home_before",
        metavar="DIR",
        help="the bridge's home directory, for any command (a --home after the command wins)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run the bridge daemon in the foreground (logs on stderr; Ctrl-C stops it)",
        description=(
            "Run the bridge daemon in the foreground. Settings come from flags, then "
            "CODEDECK_* environment variables, then <home>/config.toml, then defaults. "
            "With no relay configured, the bridge serves an embedded relay and uses it. "
            "Each session runs in a session host of its own. When the daemon stops (Ctrl-C, "
            "SIGTERM) it closes the hosts, which stops their agents (a turn in progress is cut "
            "short; the sessions stay listed and resume at the next start), except under "
            "systemd, where it leaves them running for the next start to adopt. "
            "--keep-sessions and --close-sessions choose either way; `codedeck-bridge "
            "sessions close` ends sessions for good."
        ),
    )
    _add_home(run)
    keep = run.add_mutually_exclusive_group()
    keep.add_argument(
        "--keep-sessions",
        dest="keep_sessions",
        action="store_const",
        const=True,
        default=None,
        help="on Ctrl-C/SIGTERM leave the sessions running in their hosts; the next "
        "`codedeck-bridge run` adopts them (the default under systemd)",
    )
    keep.add_argument(
        "--close-sessions",
        dest="keep_sessions",
        action="store_const",
        const=False,
        help="on Ctrl-C/SIGTERM close every session's host, stopping its agent; the "
        "sessions resume at the next start (the default in the foreground)",
    )
    run.add_argument(
        "--relay",
        dest="relays",
        action="append",
        default=[],
        metavar="URL",
        help="a relay to use (ws:// or wss://); repeat for several",
    )
    run.add_argument(
        "--workspace",
        dest="workspaces",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory sessions may work in; repeat for several (default: your home)",
    )
    run.add_argument("--machine-name", metavar="NAME", help="the name phones show (default: host)")
    run.add_argument(
        "--embedded-relay",
        metavar="HOST:PORT",
        help="where the embedded relay listens when no relay is configured "
        "(default 127.0.0.1:7777; 0.0.0.0:7777 serves phones on the LAN)",
    )
    run.add_argument("--key-file", metavar="FILE", help="read the bridge key (nsec/hex) from FILE")
    run.add_argument(
        "--log-level",
        default=os.environ.get("CODEDECK_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity (default INFO)",
    )
    run.add_argument(
        "--log-format",
        default=os.environ.get("CODEDECK_LOG_FORMAT", "auto"),
        choices=LOG_FORMATS,
        help="log lines as text or JSON; auto (the default) is text on a terminal, JSON otherwise",
    )
    add_control_commands(sub)
    desiide = sub.add_parser(
        "desiide",
        help="serve the Desiide editor extension on stdio (the extension starts this)",
        description=(
            "The Desiide orchestrator: JSON-RPC 2.0 over stdin/stdout in Content-Length frames "
            "(DESIIDE.md). The editor extension forks it; its tasks run as sessions of the "
            "bridge daemon of --home (started in this process when none runs), so paired "
            "phones see them too. Logs go to stderr as JSON lines and to "
            "<log-dir>/orchestrator.log. It exits when stdin closes or on SIGTERM."
        ),
    )
    _add_home(desiide)
    desiide.add_argument(
        "--log-dir", metavar="DIR", help="where orchestrator.log rotates (default: none)"
    )
    desiide.add_argument(
        "--log-level",
        default=os.environ.get("CODEDECK_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity (default INFO)",
    )
    _add_ops_commands(sub)
    add_doctor_command(sub)
    add_service_commands(sub)
    return parser


def _configure_logging(level: str, fmt: str = "auto") -> None:
    configure_logging(level, fmt, stream=sys.stderr)
    # A hang that the systemd watchdog ends with SIGABRT leaves every thread's Python stack in
    # the journal, which is how a blocked event loop gets diagnosed.
    if not faulthandler.is_enabled():
        faulthandler.enable(file=sys.stderr)


def _loaded(*, collect: bool) -> None:
    """The command's modules are loaded: turn the garbage collector back on.

    ``bridge.__main__`` turned it off for start-up (its docstring says why). What start-up made
    lives as long as the process, so it is frozen out of every later collection; a long-lived
    process (`collect`) first collects once, so that start-up's garbage is not frozen with it.
    A caller that imported this module itself (a test calling :func:`main`) left the collector
    on: then nothing changes.
    """
    if gc.isenabled():
        return
    if collect:
        gc.collect()
    gc.freeze()
    gc.enable()


def _cmd_run(args: argparse.Namespace) -> int:
    from bridge.runtime.daemon import DaemonError, run_daemon
    from store.errors import StoreError

    _loaded(collect=True)
    _configure_logging(args.log_level, args.log_format)
    try:
        settings = load_settings(
            flags={
                "home": args.home,
                "relays": args.relays,
                "workspaces": args.workspaces,
                "machine_name": args.machine_name,
                "embedded_relay": args.embedded_relay,
                "key_file": args.key_file,
            },
            env=os.environ,
        )
    except ConfigError as exc:
        print(f"codedeck-bridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        asyncio.run(run_daemon(settings, keep_sessions=args.keep_sessions))
    except (DaemonError, StoreError) as exc:
        print(f"codedeck-bridge: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``codedeck-bridge`` console script (through ``bridge.__main__``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "home", None) is None and args.home_before is not None:
        args.home = args.home_before
    problem = _home_problem(args)
    if problem is not None:
        return _fail(problem, EXIT_USAGE)
    if args.command == "run":
        return _cmd_run(args)
    _loaded(collect=False)
    if args.command in CONTROL_COMMANDS:
        return run_control_command(args)
    commands = {
        "sessions": _cmd_sessions,
        "decisions": _cmd_decisions,
        "desiide": _cmd_desiide,
        "config": _cmd_config,
        "keys": _cmd_keys,
        "doctor": run_doctor_command,
        "service": run_service_command,
    }
    if args.command in commands:
        try:
            return commands[args.command](args)
        except KeyboardInterrupt:
            print("\nInterrupted.", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # `codedeck-bridge decisions | head`
            sys.stderr.close()
            return EXIT_FAILURE
    parser.print_help(sys.stderr)
    return EXIT_USAGE


# --- sessions, decisions, config show, keys show ---------------------------------------------------


def _add_ops_commands(sub: Any) -> None:
    sessions = sub.add_parser(
        "sessions",
        help="list the sessions of the running daemon, or close sessions",
        description=(
            "List the running daemon's sessions with their state (via its control socket). "
            "`sessions close ID` or `sessions close --all` ends sessions."
        ),
    )
    _add_home(sessions)
    sessions.add_argument("--json", action="store_true", help="print the sessions as a JSON array")
    actions = sessions.add_subparsers(dest="sessions_action", metavar="ACTION")
    close = actions.add_parser(
        "close",
        help="close a session (or every one): its host stops its agent and exits",
        description=(
            "Close a session, or every session with --all, as the phone's close does: the "
            "session ends, its host stops its agent and exits, and the phones see it removed. "
            "With a daemon running this goes through it and waits until the hosts are gone; "
            "with none, the sessions are removed from the store and their hosts stopped here "
            "(the phones learn it when the bridge starts next)."
        ),
    )
    target = close.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "session_id", nargs="?", metavar="ID", help="the session (`codedeck-bridge sessions`)"
    )
    target.add_argument("--all", action="store_true", help="close every session")
    # SUPPRESS: `sessions --home X close` and `sessions close --home X` both work.
    close.add_argument(
        "--home",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="the bridge's home directory (default: $CODEDECK_HOME or ~/.codedeck)",
    )
    close.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the closed session ids as JSON",
    )

    decisions = sub.add_parser(
        "decisions",
        help="show the permission gate's decisions (its audit log)",
        description=(
            "Show the permission gate's recent decisions, oldest first: when, which session and "
            "tool, the outcome and its reasons. Reads the bridge database directly and "
            "read-only, so it works whether or not the daemon runs."
        ),
    )
    _add_home(decisions)
    decisions.add_argument("--session", metavar="ID", help="only the decisions of this session")
    decisions.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_DECISIONS,
        metavar="N",
        help=f"show the N most recent decisions (default {DEFAULT_DECISIONS})",
    )
    decisions.add_argument("--json", action="store_true", help="print the decisions as JSON")

    config = sub.add_parser(
        "config",
        help="show the effective configuration",
        description="Inspect the bridge's configuration (works with the daemon stopped).",
    )
    config_actions = config.add_subparsers(dest="config_action", metavar="ACTION", required=True)
    show = config_actions.add_parser(
        "show",
        help="every setting, its value and where it came from (flag, env, file, default)",
        description=(
            "Show every setting with its value and origin (env CODEDECK_*, <home>/config.toml, "
            "or default), as `codedeck-bridge run` would see it without flags. Secrets are "
            "shown as set/unset only."
        ),
    )
    _add_home(show)
    show.add_argument("--json", action="store_true", help="print the settings as JSON")

    keys = sub.add_parser(
        "keys",
        help="show the bridge's identity (npub)",
        description="Inspect the bridge's Nostr identity (works with the daemon stopped).",
    )
    keys_actions = keys.add_subparsers(dest="keys_action", metavar="ACTION", required=True)
    keys_show = keys_actions.add_parser(
        "show",
        help="print the bridge's npub (and, with --nsec, its secret key)",
        description=(
            "Print the bridge's public key (npub), read from the key file when one is "
            "configured, else from the store. With --nsec, also the secret key: anyone who has it "
            "can impersonate this bridge to your phones."
        ),
    )
    _add_home(keys_show)
    keys_show.add_argument(
        "--nsec", action="store_true", help="also print the secret key (a warning goes to stderr)"
    )
    keys_show.add_argument("--json", action="store_true", help="print the keys as JSON")


def _fail(message: str, code: int = EXIT_FAILURE) -> int:
    print(f"codedeck-bridge: {message}", file=sys.stderr)
    return code


def _home_problem(args: argparse.Namespace) -> str | None:
    """Why the command's home cannot serve (`bridge.cli.home`); doctor reports it."""
    if args.command in (None, "doctor") or (args.command == "service" and not args.home):
        return None
    return home_error(args.command, _home_of(args), home_source(args.home, os.environ))


def _print_json(value: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _settings(args: argparse.Namespace) -> Settings:
    """The settings as `run` would load them without flags.

    Raises:
        ConfigError: an invalid setting, or a config file that cannot be read at all (e.g. the
            home is a file), which `load_settings` lets through as an OSError.
    """
    try:
        return load_settings(flags={"home": args.home}, env=os.environ)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the configuration under {args.home or default_home(os.environ)}: "
            f"{exc.strerror or exc}; check --home"
        ) from None


def _home_of(args: argparse.Namespace) -> Path:
    if args.home:
        return Path(os.path.expanduser(args.home)).absolute()
    return default_home(os.environ)


def _cmd_sessions(args: argparse.Namespace) -> int:
    home = _home_of(args)
    if args.sessions_action == "close":
        return run_sessions_close(args, home)

    async def call() -> Any:
        async with await ControlClient.connect(home) as client:
            return await client.sessions_list()

    try:
        sessions = asyncio.run(call())
    except DaemonNotRunning as exc:
        default = home == default_home(os.environ)
        command = "codedeck-bridge run" if default else f"codedeck-bridge run --home {home}"
        return _fail(
            not_running_message(home, exc.socket_path, stale=exc.stale, run_command=command)
        )
    except ControlError as exc:
        return _fail(str(exc))
    if args.json:
        _print_json(sessions)
        return EXIT_OK
    if not isinstance(sessions, list):
        return _fail("the daemon's session list is malformed; update codedeck-bridge")
    if not sessions:
        print("No session. Start one from the CodeDeck app.")
        return EXIT_OK
    for session in sessions:
        if not isinstance(session, dict):
            continue
        line = f"{safe_text(session.get('sessionId'))}  {safe_text(session.get('state'))}"
        if session.get("title"):
            line += f"  {safe_text(session.get('title'), limit=80)}"
        if session.get("cwd"):
            line += f"  in {safe_text(session.get('cwd'), limit=200)}"
        print(line)
    return EXIT_OK


def _cmd_desiide(args: argparse.Namespace) -> int:
    from bridge.desiide.server import run_orchestrator

    log_dir = Path(os.path.expanduser(args.log_dir)).absolute() if args.log_dir else None
    return run_orchestrator(_home_of(args), log_dir, args.log_level)


def _cmd_decisions(args: argparse.Namespace) -> int:
    from store.decisions import MAX_LIMIT, read_decisions
    from store.errors import StoreError
    from store.readonly import NoDatabase, open_readonly

    if not 1 <= args.limit <= MAX_LIMIT:
        return _fail(f"--limit must be between 1 and {MAX_LIMIT}", EXIT_USAGE)
    home = _home_of(args)
    try:
        with open_readonly(home) as db:
            rows = read_decisions(db, args.session, args.limit)
    except NoDatabase:
        rows = []
    except StoreError as exc:
        return _fail(str(exc))
    rows.reverse()  # oldest first, like a log
    if args.json:
        _print_json([row.as_json() for row in rows])
        return EXIT_OK
    if not rows:
        scope = f" for session {safe_text(args.session)}" if args.session else ""
        print(f"No permission decision recorded{scope}.")
        return EXIT_OK
    for row in rows:
        reasons = ",".join(safe_text(r, limit=40) for r in row.reasons) or "-"
        line = (
            f"{safe_text(row.at)}  {safe_text(row.session_id, limit=40)}  "
            f"{safe_text(row.tool, limit=40)}  {safe_text(row.outcome, limit=30)}  [{reasons}]"
        )
        if row.detail:
            line += f"  {safe_text(row.detail, limit=160)}"
        print(line)
    return EXIT_OK


def _secret_rows(settings: Settings) -> list[tuple[str, str, str]]:
    """(name, "set"/"unset", where) for every secret the bridge may use; never their values."""
    from bridge.doctor.local import CREDENTIAL_VARIABLES, SERVICE_ENV_FILE

    rows = []
    if settings.key_file is not None:
        state = "set" if settings.key_file.is_file() else "unset (the file is missing)"
        rows.append(("bridge key", state, f"key file {settings.key_file}"))
    else:
        rows.append(("bridge key", "kept in the store", str(settings.home / "bridge.db")))
    service_env = settings.home / SERVICE_ENV_FILE
    for name in (*CREDENTIAL_VARIABLES, "ANTHROPIC_BASE_URL"):
        rows.append((name, "set" if os.environ.get(name) else "unset", "this environment"))
    rows.append(
        (
            SERVICE_ENV_FILE,
            "present" if service_env.is_file() else "absent",
            f"{service_env} (the service's environment)",
        )
    )
    return rows


def _cmd_config(args: argparse.Namespace) -> int:
    try:
        settings = _settings(args)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)
    rows = describe(settings)
    secrets = _secret_rows(settings)
    host = "service" if os.environ.get("INVOCATION_ID") else "cli"
    if args.json:
        _print_json(
            {
                "settings": [{"name": n, "value": v, "origin": o} for n, v, o in rows],
                "secrets": [{"name": n, "state": s, "where": w} for n, s, w in secrets],
                "host": host,
                "configFile": str(settings.config_file),
                # The ACP agents; their `env` shows names only (values may be credentials).
                "agents": [
                    {
                        "id": agent.agent_id,
                        "label": agent.label,
                        "command": list(agent.command),
                        "env": sorted(agent.env),
                        "origin": agent.origin,
                    }
                    for agent in settings.agents
                ],
            }
        )
        return EXIT_OK
    exists = "" if settings.config_file.exists() else " (not present: defaults apply)"
    print(f"config file: {settings.config_file}{exists}")
    width = max(len(n) for n, _, _ in (*rows, *secrets))
    for name, value, origin in rows:
        print(f"{name:<{width}}  {value}  [{origin}]")
    print("secrets (set/unset only):")
    for name, state, where in secrets:
        print(f"{name:<{width}}  {state}  [{where}]")
    return EXIT_OK


def _cmd_keys(args: argparse.Namespace) -> int:
    from bridge.nostr.keys import Keypair, NostrKeyError
    from bridge.runtime.identity import IdentityError, read_key_file
    from store.errors import StoreError
    from store.readonly import NoDatabase, open_readonly

    try:
        settings = _settings(args)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)
    if settings.key_file is not None:
        try:
            keypair = read_key_file(settings.key_file)
        except IdentityError as exc:
            return _fail(str(exc))
        source = f"key file {settings.key_file}"
    else:
        try:
            with open_readonly(settings.home) as db:
                row = (
                    db.fetchone("SELECT secret_key FROM identity WHERE id = 1")
                    if db.has_table("identity")
                    else None
                )
        except NoDatabase:
            if not settings.home.exists():
                return _fail(
                    missing_home_message(settings.home, home_source(args.home, os.environ)),
                    EXIT_USAGE,
                )
            row = None
        except StoreError as exc:
            return _fail(f"cannot read the bridge identity: {exc}")
        if row is None:
            return _fail(
                f"the bridge in {settings.home} has no identity yet; start it once "
                "(`codedeck-bridge run`) to create one"
            )
        try:
            keypair = Keypair.from_secret(bytes(row[0]))
        except (NostrKeyError, TypeError):
            return _fail(
                f"{settings.home / 'bridge.db'} holds an invalid bridge key; restore the "
                "database from a backup"
            )
        source = f"store {settings.home / 'bridge.db'}"
    if args.nsec:
        print(
            "codedeck-bridge: WARNING: the nsec below is this bridge's secret key. Anyone who has "
            "it can impersonate the bridge to your phones. Do not paste it into chats, issues or "
            "logs.",
            file=sys.stderr,
        )
    if args.json:
        body = {"npub": keypair.npub, "pubkey": keypair.public_hex, "source": source}
        if args.nsec:
            body["nsec"] = keypair.nsec
        _print_json(body)
        return EXIT_OK
    print(f"npub:   {keypair.npub}")
    print(f"hex:    {keypair.public_hex}")
    print(f"source: {source}")
    if args.nsec:
        print(f"nsec:   {keypair.nsec}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
