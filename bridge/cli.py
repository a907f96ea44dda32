"""The ``codedeck-bridge`` command line.

User errors (a bad flag, an invalid setting, a second daemon on the same home) are reported in
one line on stderr with what to do, and exit with a status scripts can rely on:

- 0: success;
- 1: the operation failed (for example the daemon stopped on an error);
- 2: usage or configuration error.

No Python traceback is shown for a user error; unexpected errors are logged with their traceback,
because those are bugs to report.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from bridge import __version__
from bridge.config import ConfigError, load_settings
from bridge.control.commands import CONTROL_COMMANDS, add_control_commands, run_control_command

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run the bridge daemon in the foreground (logs on stderr; Ctrl-C stops it)",
        description=(
            "Run the bridge daemon in the foreground. Settings come from flags, then "
            "CODEDECK_* environment variables, then <home>/config.toml, then defaults. "
            "With no relay configured, the bridge serves an embedded relay and uses it."
        ),
    )
    _add_home(run)
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
    add_control_commands(sub)
    return parser


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _cmd_run(args: argparse.Namespace) -> int:
    from bridge.runtime.daemon import DaemonError, run_daemon
    from store.errors import StoreError

    _configure_logging(args.log_level)
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
        asyncio.run(run_daemon(settings))
    except (DaemonError, StoreError) as exc:
        print(f"codedeck-bridge: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``codedeck-bridge`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        return _cmd_run(args)
    if args.command in CONTROL_COMMANDS:
        return run_control_command(args)
    parser.print_help(sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
