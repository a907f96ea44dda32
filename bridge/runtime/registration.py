"""Registering with a private CodeDeck relay (the relay's admin API, ``relaypolicy``).

A write-restricted relay accepts the app's kinds from registered keys only. When the bridge is
configured with the relay's admin endpoint and token, it keeps the registry in step with its
own state, in the background and never blocking pairing:

- at start: the bridge's own key;
- when a phone pairs (QR or npub): the phone's key;
- when a pairing window opens: the window, so a new phone can pair through the private relay;
- when a phone is unpaired: the phone's key is removed.

Each call retries with backoff (``relaypolicy.client``); a failure is logged with what to check
and never stops the daemon. The token is never logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from relaypolicy.client import AdminApiError, AdminClient

__all__ = ["MAX_WINDOW_SECONDS", "RelayRegistration"]

logger = logging.getLogger(__name__)

MAX_WINDOW_SECONDS = 900
"""The admin API accepts a pairing window at most 15 minutes ahead."""


class RelayRegistration:
    """Fire-and-owned calls to a relay's admin API."""

    def __init__(self, base_url: str, token: str) -> None:
        self._client = AdminClient(base_url, token)
        self._base_url = base_url
        self._tasks: set[asyncio.Task[None]] = set()

    def register(self, pubkey: str, label: str = "") -> None:
        self._spawn(self._call("register", self._client.register(pubkey, label=label), pubkey))

    def unregister(self, pubkey: str) -> None:
        self._spawn(self._call("unregister", self._client.unregister(pubkey), pubkey))

    def open_window(self, bridge_pubkey: str, now: float, duration: float) -> None:
        until = int(now + min(duration, MAX_WINDOW_SECONDS))
        call = self._client.open_pairing_window(bridge_pubkey, until)
        self._spawn(self._call("pairing window", call, bridge_pubkey))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro, name="relay-registration")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, what: str, call: Coroutine[Any, Any, object], pubkey: str) -> None:
        try:
            outcome = await call
        except AdminApiError as exc:
            logger.warning(
                "! relay registration (%s %s…) at %s failed: %s; check register_url and the "
                "admin token",
                what,
                pubkey[:8],
                self._base_url,
                exc,
            )
            return
        except Exception as exc:  # network errors after the client's retries
            logger.warning(
                "! relay registration (%s %s…) at %s failed: %s",
                what,
                pubkey[:8],
                self._base_url,
                exc,
            )
            return
        logger.info(
            "relay registration: %s %s… → %s", what, pubkey[:8], getattr(outcome, "name", outcome)
        )
