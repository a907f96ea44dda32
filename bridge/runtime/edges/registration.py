"""Registering with a private CodeDeck relay (the relay's admin API, ``relaypolicy``).

A write-restricted relay accepts the app's kinds from registered keys only. When the bridge is
configured with the relay's admin endpoint and token, it keeps the registry in step with its
own state, in the background and never blocking pairing:

- at start: the bridge's own key, and any pairing window a previous run could not close (it
  was killed) is closed;
- when a phone pairs (QR or npub): the phone's key;
- when a pairing window opens: the window, so a new phone can pair through the private relay;
- when the bridge's window ends (a phone paired through it, it expired, the daemon stops): the
  relay's window is closed too (``until`` in the past), so no stranger can write to the bridge
  through the relay for what would be left of it;
- when a phone is unpaired: the phone's key is removed.

Each call retries with backoff (``relaypolicy.client``) in a task of its own (a
:class:`~bridge.tasks.TaskSet`, cancelled at shutdown); a failure is logged with what to check
and never stops the daemon. The calls reach the relay in the order they were made (one at a time,
first come first served): a window opened then closed, or a phone paired then unpaired, must not
end the other way round because the first call needed a retry. At shutdown a window still open
on the relay is closed with one short attempt (:data:`CLOSE_WINDOW_TIMEOUT`). The token is never
logged, and its file must be private (:func:`read_token_file`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

from bridge.tasks import TaskSet
from relaypolicy.client import AdminApiError, AdminClient

__all__ = [
    "CLOSED_UNTIL",
    "CLOSE_WINDOW_TIMEOUT",
    "MAX_WINDOW_SECONDS",
    "RegistrationError",
    "RelayRegistration",
    "failure_hint",
    "read_token_file",
]

logger = logging.getLogger(__name__)

MAX_WINDOW_SECONDS = 900
"""The admin API accepts a pairing window at most 15 minutes ahead."""
CLOSE_WINDOW_TIMEOUT = 3.0
"""Seconds the daemon's shutdown waits to close a window still open on the relay."""
CLOSED_UNTIL = 0
"""The ``until`` that closes a window: the epoch, in the past whatever the relay's clock says."""


class RegistrationError(Exception):
    """The registration settings cannot be used; the message says how to fix them."""


def read_token_file(path: Path, setting: str) -> str:
    """The first line of a private file holding a token (the token is never in an error).

    Raises:
        RegistrationError: the file is unreadable, readable by others, or empty.
    """
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistrationError(f"{setting}: cannot read {path} ({exc.strerror or exc})") from None
    if info.st_mode & 0o077:
        raise RegistrationError(
            f"{setting}: {path} is readable by other users; run: chmod 600 {path}"
        )
    token = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not token:
        raise RegistrationError(f"{setting}: {path} is empty; put the relay's admin token in it")
    return token


class RelayRegistration:
    """Owned calls to a relay's admin API.

    Args:
        base_url: the admin API (``register_url``).
        token: its bearer token.
    """

    def __init__(self, base_url: str, token: str) -> None:
        self._client = AdminClient(base_url, token)
        self._last_chance = AdminClient(base_url, token, timeout=CLOSE_WINDOW_TIMEOUT, attempts=1)
        self._base_url = base_url
        self._tasks = TaskSet("relay registration", logger=logger)
        self._turn = asyncio.Lock()
        """One call at a time, in the order they were made (the lock wakes waiters in order)."""
        self._window: str | None = None
        """The bridge whose window may be open on the relay: asked to open, and no close
        confirmed since."""
        self._window_asks = 0
        """Window calls made so far: a close confirms only if no window was asked after it."""

    # Each call is passed as a function and made inside the task: a coroutine made here would
    # never be awaited when the task is refused (closed) or cancelled before it starts.

    def register_bridge(self, bridge_pubkey: str, label: str) -> None:
        """At start: register the bridge, and close a window a previous run left open.

        A daemon killed (``kill -9``, OOM) while its window was open could not close it; this
        run's window starts closed, so the relay's must too.
        """
        self.register(bridge_pubkey, label)
        self._window = bridge_pubkey
        self.close_window(bridge_pubkey)

    def register(self, pubkey: str, label: str = "") -> None:
        call = partial(self._client.register, pubkey, label=label)
        self._spawn(self._call("register", call, pubkey))

    def unregister(self, pubkey: str) -> None:
        self._spawn(self._call("unregister", partial(self._client.unregister, pubkey), pubkey))

    def open_window(self, bridge_pubkey: str, now: float, duration: float) -> None:
        until = int(now + min(duration, MAX_WINDOW_SECONDS))
        self._window = bridge_pubkey
        self._window_asks += 1
        call = partial(self._client.open_pairing_window, bridge_pubkey, until)
        self._spawn(self._call("pairing window", call, bridge_pubkey))

    def close_window(self, bridge_pubkey: str) -> None:
        """End the relay's window of ``bridge_pubkey`` (a no-op when none is open there).

        Sent even when the window's end has passed on this machine's clock: the relay compares
        it with its own clock, which may run behind. For the same reason the window is closed
        with :data:`CLOSED_UNTIL`, in the past on any clock, rather than with "now".
        """
        if self._window != bridge_pubkey:
            return
        self._window_asks += 1
        self._spawn(self._close_window(self._client, bridge_pubkey, self._window_asks))

    async def close(self) -> None:
        """Cancel the calls still queued; close a window still open on the relay (one try)."""
        await self._tasks.close()
        bridge_pubkey = self._window
        if bridge_pubkey is None:
            return
        try:
            async with asyncio.timeout(CLOSE_WINDOW_TIMEOUT + 1):
                await self._close_window(self._last_chance, bridge_pubkey, self._window_asks)
        except TimeoutError:
            logger.warning(
                "! relay registration: the pairing window at %s stays open until it expires "
                "(the relay did not answer in time)",
                self._base_url,
            )

    async def _close_window(self, client: AdminClient, bridge_pubkey: str, asked: int) -> None:
        """Close the window. Once the relay did, it is known closed unless another window call
        was made after this one (``asked`` is the count of window calls when it was made)."""
        call = partial(client.open_pairing_window, bridge_pubkey, CLOSED_UNTIL)
        if await self._call("pairing window close", call, bridge_pubkey) and (
            asked == self._window_asks
        ):
            self._window = None

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        self._tasks.spawn(coro, "relay-registration")

    async def _call(
        self, what: str, call: Callable[[], Coroutine[Any, Any, object]], pubkey: str
    ) -> bool:
        """Make ``call`` in its turn and log the outcome; True when the relay did it."""
        try:
            async with self._turn:
                outcome = await call()
        except AdminApiError as exc:
            logger.warning(
                "! relay registration (%s %s…) at %s failed: %s; %s",
                what,
                pubkey[:8],
                self._base_url,
                exc,
                failure_hint(exc),
            )
            return False
        except Exception as exc:  # network errors after the client's retries
            logger.warning(
                "! relay registration (%s %s…) at %s failed: %s",
                what,
                pubkey[:8],
                self._base_url,
                exc,
            )
            return False
        logger.info(
            "relay registration: %s %s… → %s", what, pubkey[:8], getattr(outcome, "name", outcome)
        )
        return True


def failure_hint(exc: AdminApiError) -> str:
    """What to check: our settings for a refusal, the relay for its own failure or silence."""
    if exc.status in (401, 403):
        return "check the admin token (register_token_file) against the relay's"
    if exc.retryable or exc.status is None or exc.status >= 500:
        return "the relay's admin API failed or did not answer; check that the relay is up"
    return "check register_url (it must be the relay's admin API)"
