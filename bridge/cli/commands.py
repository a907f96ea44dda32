"""The CLI commands that talk to a running daemon: ``status``, ``pair``, ``phones``, ``unpair``.

``status`` also works without a daemon: it says so, and counts the session hosts still running
under the home (they outlive the daemon; the next start adopts them).

They live beside the control client rather than in ``bridge/cli/main.py`` so that the command line's
skeleton stays small; ``bridge.cli.main`` registers them with `add_control_commands` and dispatches
with `run_control_command`.

Conventions (as ``bridge/cli/main.py``): results on stdout, errors as one ``codedeck-bridge: …`` line
on stderr that says what to do, exit status 0 ok, 1 failure, 2 usage; 130 when the user stops a
``pair`` wait with Ctrl-C (the shell's convention for SIGINT). ``--json`` prints one JSON
document on stdout, also for the "not running" case of ``status``, so scripts never parse text.
A home that is a file, or one that does not exist, is refused before any of this, as a usage
error (exit 2, also with ``--json``: there is no bridge to describe), by `bridge.cli.home`.
Arguments that can be checked locally (a malformed npub, a timeout out of range) are refused
before connecting, as usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TextIO

from bridge.cli.pair_advice import is_local_only, unreachable_relays_advice
from bridge.cli.render import (
    format_duration,
    render_phones,
    render_qr,
    render_status,
    render_web_pair,
    safe_text,
)
from bridge.config import default_home
from bridge.control.client import (
    ControlClient,
    ControlError,
    DaemonNotRunning,
    not_running_message,
)
from bridge.control.hosts import running_hosts
from bridge.control.methods import DEFAULT_PAIR_WINDOW, MAX_WAIT, METHODS, parse_timestamp
from bridge.control.rpc import RpcError
from bridge.nostr.keys import NostrKeyError, hex_to_npub, parse_pubkey
from bridge.tasks import race
from store.errors import StoreError
from store.lock import read_lock_holder

__all__ = ["CONTROL_COMMANDS", "add_control_commands", "run_control_command"]

CONTROL_COMMANDS: Final = frozenset({"status", "pair", "phones", "unpair"})
EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
PAIR_JSON_KEYS: Final = ("url", "npub", "token", "relays", "machine", "expiresAt", "webUrl")
_GRACE: Final = 2.0  # seconds pair.wait may outlast the window, for the daemon's own latency


class _UsageError(Exception):
    """A bad argument found before talking to the daemon (exit 2)."""


def _add_common(parser: argparse.ArgumentParser, *, json_help: str | None) -> None:
    parser.add_argument(
        "--home",
        metavar="DIR",
        help="the bridge's home directory (default: $CODEDECK_HOME or ~/.codedeck)",
    )
    if json_help:
        parser.add_argument("--json", action="store_true", help=json_help)


def add_control_commands(sub: Any) -> None:
    """Register the sub-commands on ``build_parser()``'s sub-parsers object."""
    status = sub.add_parser(
        "status",
        help="show whether the daemon runs, its npub, relays, phones and sessions",
        description="Show the running daemon's state. Exit status 0 only when it runs.",
    )
    _add_common(status, json_help="print one JSON object ({running: false, …} when stopped)")

    pair = sub.add_parser(
        "pair",
        help="pair a phone: show a QR code to scan with the CodeDeck app",
        description=(
            "Open a pairing window on the running daemon, show its QR code and link, and wait "
            "until a phone pairs or the window closes. With --npub, pair a phone by its key "
            "instead."
        ),
    )
    _add_common(pair, json_help="print the pairing window as JSON and return at once")
    pair.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help=f"how long the window stays open, in seconds (default {DEFAULT_PAIR_WINDOW:g})",
    )
    pair.add_argument("--npub", metavar="NPUB", help="pair this phone key (npub1… or hex)")
    pair.add_argument("--label", metavar="L", help="with --npub: the phone's name")

    phones = sub.add_parser("phones", help="list the paired phones")
    _add_common(phones, json_help="print the phones as a JSON array")

    unpair = sub.add_parser(
        "unpair",
        help="revoke a paired phone",
        description="Unpair one phone: the bridge stops accepting its commands and sending to it.",
    )
    unpair.add_argument("npub", metavar="NPUB", help="the phone's key (npub1… or hex)")
    _add_common(unpair, json_help="print the result as JSON")


def _home(args: argparse.Namespace) -> Path:
    if args.home:
        return Path(os.path.expanduser(args.home)).absolute()
    return default_home(os.environ)


def _not_running_text(exc: DaemonNotRunning, home: Path) -> str:
    """The "not running" line, telling ``run --home`` when the home is not the default one."""
    default = home == default_home(os.environ)
    command = "codedeck-bridge run" if default else f"codedeck-bridge run --home {home}"
    return not_running_message(home, exc.socket_path, stale=exc.stale, run_command=command)


def _print_json(value: Any, out: TextIO) -> None:
    out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    out.flush()


def _fail(message: str) -> int:
    print(f"codedeck-bridge: {message}", file=sys.stderr)
    return EXIT_FAILURE


def _pubkey_arg(value: str, flag: str) -> str:
    try:
        return hex_to_npub(parse_pubkey(value))
    except NostrKeyError as exc:
        raise _UsageError(f"{flag}: {exc}") from None


def run_control_command(args: argparse.Namespace) -> int:
    """Run ``args.command`` (one of `CONTROL_COMMANDS`); returns the exit status."""
    commands: dict[str, Callable[[argparse.Namespace, Path], int]] = {
        "status": _cmd_status,
        "pair": _cmd_pair,
        "phones": _cmd_phones,
        "unpair": _cmd_unpair,
    }
    home = _home(args)
    try:
        return commands[args.command](args, home)
    except _UsageError as exc:
        print(f"codedeck-bridge {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DaemonNotRunning as exc:
        return _fail(_not_running_text(exc, home))
    except ControlError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


def _call(coroutine: Callable[[ControlClient], Coroutine[Any, Any, Any]], home: Path) -> Any:
    async def session() -> Any:
        async with await ControlClient.connect(home) as client:
            return await coroutine(client)

    return asyncio.run(session())


# --- status -------------------------------------------------------------------------------------


def _cmd_status(args: argparse.Namespace, home: Path) -> int:
    out = sys.stdout
    try:
        status = _call(lambda client: client.status(), home)
    except DaemonNotRunning as exc:
        return _not_running(args, home, exc, out)
    except ControlError as exc:
        if args.json:
            _print_json({"running": True, "home": str(home), "error": str(exc)}, out)
            return EXIT_FAILURE
        raise
    if args.json:
        body = status if isinstance(status, dict) else {"status": status}
        _print_json({"running": True, **body}, out)
    else:
        if not isinstance(status, dict):
            return _fail("the daemon's status answer is malformed; update codedeck-bridge")
        out.write("\n".join(render_status(status)) + "\n")
    return EXIT_OK


def _not_running(args: argparse.Namespace, home: Path, exc: DaemonNotRunning, out: TextIO) -> int:
    try:
        holder = read_lock_holder(home)
        lock_error = None
    except StoreError as error:
        holder, lock_error = None, str(error)
    if holder is not None:
        pid = holder.pid if holder.pid is not None else "unknown"
        message = (
            f"a codedeck-bridge process (pid {pid}) holds {home} but does not answer on its "
            "control socket: it is starting, stopping or stuck; check its log"
            + (f", or stop it with `kill {holder.pid}`" if holder.pid is not None else "")
        )
    else:
        message = _not_running_text(exc, home)
    hosts = len(running_hosts(home))
    if args.json:
        _print_json(
            {
                "running": False,
                "home": str(home),
                "lockHolder": None if holder is None else {"pid": holder.pid},
                "staleSocket": exc.stale,
                "message": message,
                "hosts": {"running": hosts},
                **({"lockError": lock_error} if lock_error else {}),
            },
            out,
        )
    else:
        out.write(message + "\n")
        if hosts:
            out.write(
                f"{hosts} session host(s) still run under {home}: the next start adopts them "
                "(`codedeck-bridge sessions close --all` ends them)\n"
            )
        if lock_error:
            print(f"codedeck-bridge: {lock_error}", file=sys.stderr)
    return EXIT_FAILURE


# --- pair ---------------------------------------------------------------------------------------


@dataclass
class _Window:
    """What the Ctrl-C message needs to know about the window (filled in as it opens)."""

    expires_at: float | None = None


def _cmd_pair(args: argparse.Namespace, home: Path) -> int:
    if args.npub is not None:
        if args.timeout is not None:
            raise _UsageError("--timeout is for the pairing window; it does not apply to --npub")
        npub = _pubkey_arg(args.npub, "--npub")
        return _pair_npub(args, home, npub)
    if args.label is not None:
        raise _UsageError("--label needs --npub (a phone pairing by QR code sends its own name)")
    duration = args.timeout
    if duration is not None and (not math.isfinite(duration) or not 1 <= duration <= MAX_WAIT):
        raise _UsageError(f"--timeout must be between 1 and {MAX_WAIT:g} seconds")
    window = _Window()
    try:
        return asyncio.run(_pair_window(home, duration, args.json, window, sys.stdout))
    except KeyboardInterrupt:
        if window.expires_at is None:
            print("\nInterrupted.", file=sys.stderr)
        else:
            left = format_duration(window.expires_at - time.time())
            until = datetime.fromtimestamp(window.expires_at).strftime("%H:%M:%S")
            print(
                f"\nStopped waiting. The pairing window stays open until {until} ({left} left): "
                "a phone can still pair until then; `codedeck-bridge phones` lists paired phones.",
                file=sys.stderr,
            )
        return EXIT_INTERRUPTED


async def _pair_window(
    home: Path, duration: float | None, as_json: bool, window: _Window, out: TextIO
) -> int:
    async with await ControlClient.connect(home) as client:
        opened = await client.pair_open(duration)
        if not isinstance(opened, dict) or not isinstance(opened.get("url"), str):
            return _fail("the daemon's pairing answer is malformed; update codedeck-bridge")
        if as_json:
            _print_json({key: opened.get(key) for key in PAIR_JSON_KEYS}, out)
            await _warn_if_unreachable(client, opened.get("relays"))
            return EXIT_OK
        expires = parse_timestamp(opened.get("expiresAt"))
        window.expires_at = (
            expires if expires is not None else time.time() + (duration or DEFAULT_PAIR_WINDOW)
        )
        url = safe_text(opened["url"], limit=4000)
        out.write("Scan this QR code with the CodeDeck app (or paste the link below):\n\n")
        try:
            out.write(render_qr(url, out))
        except ValueError as exc:
            out.write(f"({exc})\n")
        out.write(f"\n{url}\n\n")
        web_url = opened.get("webUrl")
        out.write(render_web_pair(web_url if isinstance(web_url, str) else None, out))
        out.flush()
        await _warn_if_unreachable(client, opened.get("relays"))
        try:
            won = await race(
                _wait_for_phone(client, window.expires_at), _countdown(window.expires_at, out)
            )
            assert won is not None and won[0] == 0  # the countdown never ends by itself
            result = won[1]
        finally:
            if out.isatty():
                out.write("\r\x1b[K")
                out.flush()
    if result.get("paired"):
        label = safe_text(result.get("label") or "Phone", limit=64)
        out.write(f"Paired {label} ({safe_text(result.get('npub'))}).\n")
        return EXIT_OK
    reason = safe_text(result.get("reason") or "closed", limit=40)
    return _fail(
        f"the pairing window ended ({reason}) before a phone paired; "
        "run `codedeck-bridge pair` again"
    )


async def _warn_if_unreachable(client: ControlClient, relays: Any) -> None:
    """On stderr, when no phone can reach any relay of the link: why, and the fix.

    See :mod:`bridge.cli.pair_advice`. The daemon is asked whether the relay is its
    embedded one only then, as is the kernel for the LAN address.
    """
    if not isinstance(relays, list) or not all(isinstance(r, str) for r in relays):
        return
    shown = [safe_text(r, limit=200) for r in relays]
    if not shown or not all(is_local_only(url) for url in shown):
        return
    status: Any = await client.status()
    embedded = status.get("embeddedRelay") if isinstance(status, dict) else None
    # Imported here: the embedded relay's module loads nostr-sdk, which `pair` otherwise skips.
    from bridge.runtime.edges.embedded_relay import lan_address

    advice = unreachable_relays_advice(
        shown, embedded_url=embedded if isinstance(embedded, str) else None, lan=lan_address()
    )
    if advice is not None:
        print(advice, file=sys.stderr, flush=True)


async def _wait_for_phone(client: ControlClient, expires_at: float) -> dict[str, Any]:
    while True:
        remaining = expires_at - time.time()
        result: Any = await client.pair_wait(min(max(remaining, 0.0) + _GRACE, MAX_WAIT))
        if not isinstance(result, dict):
            raise ControlError("the daemon's pairing answer is malformed; update codedeck-bridge")
        # "timeout" while the window is still open: our wait was shorter than the window.
        if result.get("paired") or result.get("reason") != "timeout" or time.time() > expires_at:
            return result


async def _countdown(expires_at: float, out: TextIO) -> None:
    """One line updated in place on a terminal; a plain line per minute otherwise. At zero it
    stays, until the wait it shows ends (it is raced against that wait)."""
    tty = out.isatty()
    last_minute: int | None = None
    while True:
        remaining = max(0.0, expires_at - time.time())
        if tty:
            minutes, seconds = divmod(int(remaining), 60)
            out.write(
                f"\r\x1b[KWaiting for a phone to pair: {minutes}:{seconds:02d} left "
                "(Ctrl-C stops waiting)"
            )
            out.flush()
        elif remaining > 0:
            # one line per minute, then one for the last minute (in seconds)
            minute = math.ceil(remaining / 60) if remaining >= 60 else 0
            if minute != last_minute:
                last_minute = minute
                left = f"{minute} min" if minute else f"{math.ceil(remaining)} s"
                out.write(f"Waiting for a phone to pair: {left} left\n")
                out.flush()
        if remaining <= 0:
            await asyncio.Event().wait()
        await asyncio.sleep(1.0 - (time.time() % 1.0) if tty else 1.0)


def _pair_npub(args: argparse.Namespace, home: Path, npub: str) -> int:
    label = (args.label or "").strip()
    try:  # the daemon's own rules, checked before connecting
        METHODS["pair.npub"].validate({"npub": npub, "label": label})
    except RpcError as exc:
        raise _UsageError(f"--label: {exc.message.removeprefix('invalid params: ')}") from None
    result = _call(lambda client: client.pair_npub(npub, label), home)
    if args.json:
        _print_json(result, sys.stdout)
        return EXIT_OK
    if not isinstance(result, dict):
        return _fail("the daemon's pairing answer is malformed; update codedeck-bridge")
    shown = f"{safe_text(result.get('label') or label or 'Phone', limit=64)} ({npub})"
    if result.get("alreadyPaired"):
        print(f"{shown} was already paired; its label is up to date.")
    else:
        print(f"Paired {shown}.")
    return EXIT_OK


# --- phones / unpair ----------------------------------------------------------------------------


def _cmd_phones(args: argparse.Namespace, home: Path) -> int:
    phones = _call(lambda client: client.phones_list(), home)
    if args.json:
        _print_json(phones, sys.stdout)
        return EXIT_OK
    if not isinstance(phones, list):
        return _fail("the daemon's phone list is malformed; update codedeck-bridge")
    lines = render_phones(phones)
    if not lines:
        print("No phone is paired; run `codedeck-bridge pair` to pair one.")
    else:
        print("\n".join(lines))
    return EXIT_OK


def _cmd_unpair(args: argparse.Namespace, home: Path) -> int:
    npub = _pubkey_arg(args.npub, "NPUB")
    result = _call(lambda client: client.phones_unpair(npub), home)
    unpaired = isinstance(result, dict) and result.get("unpaired") is True
    if args.json:
        _print_json(result, sys.stdout)
    elif unpaired:
        label = safe_text(result.get("label") or "Phone", limit=64)
        print(
            f"Unpaired {label} ({npub}): its commands are refused and nothing more is sent to it."
        )
    if not unpaired:
        return _fail(f"{npub} is not paired; `codedeck-bridge phones` lists the paired phones")
    return EXIT_OK
