"""A scripted `ControlHandler` for the control socket and CLI tests, and a short private home.

The fake keeps real state (paired phones, an open window, sessions) so the CLI tests exercise
the whole round trip, and it records every call with its validated arguments. Tests steer the
pairing wait through `pair_now` / `end_window`, and observe it through `waiting` /
`wait_cancelled`; ``sessions.close`` calls `on_close` with the ids (where a test stops its fake
hosts, as the daemon's runners would), and `keep_listed` makes it a daemon that never finishes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bridge.control import (
    HandlerError,
    PairNpubResult,
    PairOpenResult,
    PairWaitResult,
    PhoneInfo,
    SessionInfo,
    SessionsCloseResult,
    StatusResult,
    UnpairResult,
    iso_timestamp,
)
from bridge.nostr.keys import Keypair, PubKeyHex, hex_to_npub

__all__ = ["BRIDGE", "TOKEN", "FakeHandler", "RefusingHandler", "short_home"]

BRIDGE = Keypair.from_secret("01" * 32)
TOKEN = "00112233445566778899aabbccddeeff"


@contextmanager
def short_home() -> Iterator[Path]:
    """A 0700 home under /tmp with a short path (unix socket paths are capped at 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="cdk-", dir="/tmp"))
    os.chmod(path, 0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class FakeHandler:
    """Implements `bridge.control.ControlHandler` with in-memory state."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.phones: dict[str, PhoneInfo] = {}
        self.window_expires: float | None = None
        self.waiting = asyncio.Event()
        self.wait_cancelled = asyncio.Event()
        self._outcome: asyncio.Future[PairWaitResult] | None = None
        self.fail: BaseException | None = None
        self.block = asyncio.Event()  # set() releases a blocked `status`
        self.block_status = False
        self.status_finished = asyncio.Event()
        self.sessions: list[SessionInfo] = [{"sessionId": "s-1", "state": "idle"}]
        self.on_close: Callable[[list[str]], None] | None = None
        self.keep_listed = False

    def _record(self, name: str, **kwargs: Any) -> None:
        self.calls.append((name, kwargs))
        if self.fail is not None:
            raise self.fail

    async def status(self) -> StatusResult:
        self._record("status")
        if self.block_status:
            await self.block.wait()
        self.status_finished.set()
        return {
            "pid": os.getpid(),
            "startedAt": iso_timestamp(time.time() - 3725),
            "version": "0.1.0",
            "npub": BRIDGE.npub,
            "machine": "test-machine",
            "home": "/tmp/home",
            "relays": [
                {
                    "url": "ws://127.0.0.1:7777",
                    "state": "connected",
                    "lastEventAt": iso_timestamp(time.time() - 5),
                    "lastError": None,
                },
                {
                    "url": "wss://relay.example.org",
                    "state": "backoff",
                    "lastEventAt": None,
                    "lastError": "connection refused",
                },
            ],
            "embeddedRelay": "ws://127.0.0.1:7777",
            "phones": list(self.phones.values()),
            "sessions": [
                {
                    "sessionId": "s-1",
                    "state": "idle",
                    "title": "fix the tests",
                    "cwd": "/w/app",
                    "host": {"alive": True, "pid": 4242},
                }
            ],
            "lastCommandAt": None,
            "hosts": {"running": 1},
        }

    async def pair_open(self, duration: float) -> PairOpenResult:
        self._record("pair_open", duration=duration)
        self.window_expires = time.time() + duration
        self._outcome = asyncio.get_running_loop().create_future()
        relay = "ws%3A%2F%2F127.0.0.1%3A7777"
        return {
            "url": f"codedeck://pair?npub={BRIDGE.npub}&relays={relay}&machine=test&token={TOKEN}",
            "npub": BRIDGE.npub,
            "token": TOKEN,
            "relays": ["ws://127.0.0.1:7777"],
            "machine": "test",
            "expiresAt": iso_timestamp(self.window_expires),
        }

    async def pair_wait(self, timeout: float) -> PairWaitResult:
        self._record("pair_wait", timeout=timeout)
        if self._outcome is None:
            return {"paired": False, "reason": "no-window"}
        self.waiting.set()
        try:
            return await asyncio.wait_for(asyncio.shield(self._outcome), timeout)
        except TimeoutError:
            return {"paired": False, "reason": "timeout"}
        except asyncio.CancelledError:
            self.wait_cancelled.set()
            raise

    def pair_now(self, phone: Keypair, label: str) -> None:
        """A phone pairs through the open window."""
        assert self._outcome is not None
        self.phones[phone.public_hex] = {
            "npub": phone.npub,
            "label": label,
            "pairedAt": iso_timestamp(time.time()),
        }
        self._outcome.set_result({"paired": True, "label": label, "npub": phone.npub})

    def end_window(self, reason: str) -> None:
        assert self._outcome is not None
        self._outcome.set_result({"paired": False, "reason": reason})

    async def pair_npub(self, pubkey: PubKeyHex, label: str) -> PairNpubResult:
        self._record("pair_npub", pubkey=pubkey, label=label)
        already = pubkey in self.phones
        label = label or "Phone"
        self.phones[pubkey] = {
            "npub": hex_to_npub(pubkey),
            "label": label,
            "pairedAt": iso_timestamp(time.time()),
        }
        return {"npub": hex_to_npub(pubkey), "label": label, "alreadyPaired": already}

    async def phones_list(self) -> list[PhoneInfo]:
        self._record("phones_list")
        return list(self.phones.values())

    async def phones_unpair(self, pubkey: PubKeyHex) -> UnpairResult:
        self._record("phones_unpair", pubkey=pubkey)
        phone = self.phones.pop(pubkey, None)
        if phone is None:
            return {"unpaired": False, "npub": hex_to_npub(pubkey)}
        return {"unpaired": True, "npub": phone["npub"], "label": phone["label"]}

    async def sessions_list(self) -> list[SessionInfo]:
        self._record("sessions_list")
        return list(self.sessions)

    async def sessions_close(self, session_id: str | None, close_all: bool) -> SessionsCloseResult:
        self._record("sessions_close", session_id=session_id, close_all=close_all)
        known = [s["sessionId"] for s in self.sessions]
        if not close_all and session_id not in known:
            raise HandlerError(
                f"there is no session {session_id}; `codedeck-bridge sessions` lists them"
            )
        closed = known if close_all else [str(session_id)]
        if not self.keep_listed:
            self.sessions = [s for s in self.sessions if s["sessionId"] not in closed]
        if self.on_close is not None:
            self.on_close(closed)
        return {"closed": closed}


class RefusingHandler(FakeHandler):
    """Refuses pairing with a user-facing message."""

    async def pair_open(self, duration: float) -> PairOpenResult:
        raise HandlerError("the daemon is shutting down; try again once it has restarted")
