"""Registering with a private CodeDeck relay (the relay's admin API, ``relaypolicy``).

A write-restricted relay accepts the app's kinds from registered keys only. When the bridge is
configured with the relay's admin endpoint and token, it keeps the registry in step with its
own state, in the background and never blocking pairing:

- at start: the bridge's own key;
- when a phone pairs (QR or npub): the phone's key;
- when a pairing window opens: the window, so a new phone can pair through the private relay;
- when a phone is unpaired: the phone's key is removed.

Each call retries with backoff (``relaypolicy.client``) in a task of its own (a
:class:`~bridge.tasks.TaskSet`, cancelled at shutdown); a failure is logged with what to check
and never stops the daemon. The token is never logged, and its file must be private
(:func:`read_token_file`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

from bridge.tasks import TaskSet
from relaypolicy.client import AdminApiError, AdminClient

__all__ = [
    "MAX_WINDOW_SECONDS",
    "RegistrationError",
    "RelayRegistration",
    "failure_hint",
    "read_token_file",
]

logger = logging.getLogger(__name__)

MAX_WINDOW_SECONDS = 900
"""The admin API accepts a pairing window at most 15 minutes ahead."""


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
    """Owned calls to a relay's admin API."""

    def __init__(self, base_url: str, token: str) -> None:
        self._client = AdminClient(base_url, token)
        self._base_url = base_url
        self._tasks = TaskSet("relay registration", logger=logger)

    # Each call is passed as a function and made inside the task: a coroutine made here would
    # never be awaited when the task is refused (closed) or cancelled before it starts.

    def register(self, pubkey: str, label: str = "") -> None:
        call = partial(self._client.register, pubkey, label=label)
        self._spawn(self._call("register", call, pubkey))

    def unregister(self, pubkey: str) -> None:
        self._spawn(self._call("unregister", partial(self._client.unregister, pubkey), pubkey))

    def open_window(self, bridge_pubkey: str, now: float, duration: float) -> None:
        until = int(now + min(duration, MAX_WINDOW_SECONDS))
        call = partial(self._client.open_pairing_window, bridge_pubkey, until)
        self._spawn(self._call("pairing window", call, bridge_pubkey))

    async def close(self) -> None:
        await self._tasks.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.spawn(coro, "relay-registration")

    async def _call(
        self, what: str, call: Callable[[], Coroutine[Any, Any, object]], pubkey: str
    ) -> None:
        try:
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


def failure_hint(exc: AdminApiError) -> str:
    """What to check: our settings for a refusal, the relay for its own failure or silence."""
    if exc.status in (401, 403):
        return "check the admin token (register_token_file) against the relay's"
    if exc.retryable or exc.status is None or exc.status >= 500:
        return "the relay's admin API failed or did not answer; check that the relay is up"
    return "check register_url (it must be the relay's admin API)"
