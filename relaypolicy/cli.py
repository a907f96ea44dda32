"""``codedeck-relaypolicy``: the strfry plugin, the registry commands and the admin API server.

Subcommands::

    plugin       [--registry PATH] [--config FILE]     strfry's writePolicy plugin (stdin/stdout)
    register     PUBKEY|NPUB [--label L] [--registry PATH]
    unregister   PUBKEY|NPUB [--registry PATH]
    list         [--json] [--registry PATH]
    serve-admin  [--registry PATH] --token-file FILE [--bind 127.0.0.1:8089]

Every subcommand needs the registry: ``--registry``, or else ``$CODEDECK_RELAY_REGISTRY`` (the
container sets it, so ``docker compose exec admin codedeck-relaypolicy list`` just works). The
variable is read when the command runs, and a command with neither says so in one line.

Exit status: 0 success, 1 failure (a registry that cannot be opened, a bad token file, a config
file that does not load), 2 usage error (bad arguments, an invalid pubkey). User errors are one
line on stderr, never a traceback. Imports of the heavier parts (aiohttp, the plugin loop) happen
in the subcommand that needs them, so ``plugin`` starts fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from store.registry import RegistryStore

__all__ = ["PROG", "REGISTRY_ENV", "build_parser", "main"]

PROG: Final = "codedeck-relaypolicy"
REGISTRY_ENV: Final = "CODEDECK_RELAY_REGISTRY"
_EXIT_FAILURE: Final = 1
_EXIT_USAGE: Final = 2
_LOG_LEVELS: Final = ("debug", "info", "warning", "error")


class _UsageError(Exception):
    """A bad argument value: exit status 2."""


class _Failure(Exception):
    """The command could not do its job: exit status 1."""


def _add_registry(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry",
        type=Path,
        metavar="PATH",
        help=(
            "the registry database (SQLite; created if missing); "
            f"default: ${REGISTRY_ENV}, one of the two is needed{_env_now()}"
        ),
    )


def _env_now() -> str:
    """What ``--help`` adds about the variable: its value here, so a wrong path shows at once."""
    value = os.environ.get(REGISTRY_ENV, "")
    return f" (it is set: {value})" if value else f" ({REGISTRY_ENV} is not set)"


def _registry(given: Path | None) -> Path:
    """``--registry``, else ``$CODEDECK_RELAY_REGISTRY`` (read now, not when the parser was built)."""
    if given is not None:
        return given
    from_env = os.environ.get(REGISTRY_ENV, "")
    if not from_env:
        raise _UsageError(f"no registry: pass --registry PATH or set {REGISTRY_ENV}")
    return Path(from_env)


def _add_log_level(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--log-level",
        choices=_LOG_LEVELS,
        default=default,
        help=f"stderr log verbosity (default: {default})",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for ``--help`` tests and documentation)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Write policy of a private CodeDeck relay: the strfry plugin, its registry of "
            "pubkeys allowed to write, and the admin HTTP API that manages it."
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plugin = commands.add_parser(
        "plugin",
        help="run as strfry's relay.writePolicy.plugin (JSON lines on stdin/stdout)",
        description=(
            "Decide on strfry write-policy requests: one JSON line per event on stdin, one JSON "
            "answer line on stdout. Logs go to stderr. Registry changes apply without a restart."
        ),
    )
    _add_registry(plugin)
    plugin.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=(
            "the policy's limits (TOML, as deploy/relay/relaypolicy.toml); "
            "default: the built-in limits"
        ),
    )
    _add_log_level(plugin, "warning")

    register = commands.add_parser(
        "register",
        help="allow a pubkey to write",
        description="Add a pubkey (a bridge's or a phone's) to the registry: it may write at once.",
    )
    register.add_argument("pubkey", metavar="PUBKEY|NPUB", help="64 hex characters or an npub")
    register.add_argument("--label", default="", help="a note for humans (e.g. 'laptop bridge')")
    _add_registry(register)

    unregister = commands.add_parser(
        "unregister",
        help="stop a pubkey from writing",
        description="Remove a pubkey from the registry: its next event is refused.",
    )
    unregister.add_argument("pubkey", metavar="PUBKEY|NPUB", help="64 hex characters or an npub")
    _add_registry(unregister)

    listing = commands.add_parser(
        "list",
        help="show the registered pubkeys",
        description=(
            "Print each registered pubkey with when it was registered, its label and any open "
            "pairing window (without --json, the count follows on stderr)."
        ),
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    _add_registry(listing)

    admin = commands.add_parser(
        "serve-admin",
        help="serve the admin HTTP API (register-agent, pairing-window, health)",
        description=(
            "Serve POST /api/register-agent, /api/unregister-agent, /api/pairing-window and "
            "GET /api/health. Every POST needs 'Authorization: Bearer <token>'; the token is read "
            "from --token-file, which must be readable by its owner only (chmod 600)."
        ),
    )
    _add_registry(admin)
    admin.add_argument(
        "--token-file",
        type=Path,
        required=True,
        metavar="FILE",
        help=(
            "the file holding the bearer token every POST must carry (readable by its owner "
            "only: chmod 600; make one with: openssl rand -hex 32)"
        ),
    )
    admin.add_argument(
        "--bind",
        default="127.0.0.1:8089",
        metavar="HOST:PORT",
        help="the address the API listens on (default: 127.0.0.1:8089)",
    )
    _add_log_level(admin, "info")
    return parser


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format=f"%(asctime)s {PROG}[%(process)d] %(levelname)s %(name)s: %(message)s",
    )


def _parse_pubkey(value: str) -> str:
    from bridge.nostr.keys import NostrKeyError, parse_pubkey

    try:
        return str(parse_pubkey(value))
    except NostrKeyError as exc:
        raise _UsageError(f"invalid pubkey: {exc}") from None


def _npub(pubkey: str) -> str:
    from bridge.nostr.keys import hex_to_npub

    return hex_to_npub(pubkey)


def _open_store(path: Path) -> RegistryStore:
    from store.errors import StoreError
    from store.registry import RegistryStore

    try:
        return RegistryStore.open(path)
    except StoreError as exc:
        raise _Failure(str(exc)) from None


def _cmd_plugin(args: argparse.Namespace) -> int:
    from relaypolicy.config import ConfigError, load_config
    from relaypolicy.plugin import run_plugin

    _setup_logging(args.log_level)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise _Failure(str(exc)) from None
    return run_plugin(args.registry, config)


def _now() -> int:
    import time

    return int(time.time())


def _cmd_register(args: argparse.Namespace) -> int:
    from store.errors import StoreError

    pubkey = _parse_pubkey(args.pubkey)
    with _open_store(args.registry) as store:
        try:
            created = store.register(pubkey, label=args.label, now=_now())
        except StoreError as exc:
            raise _Failure(str(exc)) from None
    state = "registered" if created else "already registered"
    print(f"{state}: {_npub(pubkey)} ({pubkey})")
    return 0


def _cmd_unregister(args: argparse.Namespace) -> int:
    from store.errors import StoreError

    pubkey = _parse_pubkey(args.pubkey)
    with _open_store(args.registry) as store:
        try:
            removed = store.unregister(pubkey)
        except StoreError as exc:
            raise _Failure(str(exc)) from None
    state = "unregistered" if removed else "was not registered"
    print(f"{state}: {_npub(pubkey)} ({pubkey})")
    return 0


def _iso(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cmd_list(args: argparse.Namespace) -> int:
    import orjson

    from store.errors import StoreError

    with _open_store(args.registry) as store:
        try:
            rows = store.registrations()
        except StoreError as exc:
            raise _Failure(str(exc)) from None
    now = _now()
    for row in rows:
        window = row.pairing_until if row.pairing_until and row.pairing_until > now else None
        if args.json:
            record = {
                "pubkey": row.pubkey,
                "npub": _npub(row.pubkey),
                "label": row.label,
                "registered_at": row.registered_at,
                "pairing_until": window,
            }
            sys.stdout.write(orjson.dumps(record).decode() + "\n")
        else:
            extra = f"  pairing until {_iso(window)}" if window else ""
            label = f"  {row.label}" if row.label else ""
            print(f"{row.pubkey}  {_iso(row.registered_at)}{label}{extra}")
    if not args.json:
        print(f"{len(rows)} registered", file=sys.stderr)
    return 0


def _cmd_serve_admin(args: argparse.Namespace) -> int:
    from relaypolicy.admin import TokenFileError, parse_bind, run_admin
    from store.errors import StoreError

    _setup_logging(args.log_level)
    try:
        parse_bind(args.bind)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    try:
        run_admin(args.registry, args.token_file, args.bind)
    except (TokenFileError, StoreError) as exc:
        raise _Failure(str(exc)) from None
    except OSError as exc:
        raise _Failure(f"cannot listen on {args.bind}: {exc.strerror or exc}") from None
    return 0


_COMMANDS = {
    "plugin": _cmd_plugin,
    "register": _cmd_register,
    "unregister": _cmd_unregister,
    "list": _cmd_list,
    "serve-admin": _cmd_serve_admin,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.registry = _registry(args.registry)
        return _COMMANDS[args.command](args)
    except _UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    except _Failure as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return _EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
