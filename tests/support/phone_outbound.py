"""The phone's outbound side: command events, one-off publishing, and the outbox.

A command event is what the CodeDeck app sends (wire spec §1.2, §1.3): the encoded command stamped
``v`` and ``caps`` (a value the command already carries wins, so a test can send ``v: 9``), NIP-44
encrypted to the bridge, signed as kind 4515 with ``["p", bridge]`` and
``["expiration", created_at + 3600]``, ``created_at`` from the wall clock. The ``chunk`` envelope is
also available for commands (:func:`command_events`), for tests of the bridge's reassembly.

The :class:`Outbox` carries the traffic the phone generates by itself (sync acks, re-requests):
one task sends it in order, each command built once (so a retry is the same event, which the
bridge's dedup recognises) and retried until a relay accepts it or ``retry_seconds`` pass; what
is given up on is kept in :attr:`Outbox.undelivered` for the test to see.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, encrypt
from bridge.nostr.pool import PublishReport, RelayPool
from bridge.nostr.relay import (
    PublishOutcome,
    PublishStatus,
    RelayConnection,
    RelayConnectionError,
)
from bridge.protocol.chunking import split
from bridge.protocol.commands import Command
from bridge.protocol.kinds import COMMAND_KIND, command_tags, fragment_tags

__all__ = [
    "Outbox",
    "PhoneError",
    "PublishFailed",
    "command_events",
    "publish_direct",
    "seal",
    "stamp_command",
]

logger = logging.getLogger(__name__)

_RETRY_PAUSE_SECONDS = 0.2


class PhoneError(RuntimeError):
    """The simulator was used in a way that cannot work (offline, no bridge, oversize command)."""


class PublishFailed(PhoneError):
    """No relay accepted an event the test required to be delivered."""

    def __init__(self, report: PublishReport) -> None:
        answers = "; ".join(
            f"{o.relay}: {o.status.value} {o.message[:80]}" for o in report.outcomes
        )
        super().__init__(f"event {report.event_id[:8]} not delivered ({answers})")
        self.report = report


def stamp_command(command: Command, *, version: int | None, caps: Sequence[str] | None) -> Command:
    """``v`` and ``caps`` as the phone stamps them; values the command already has win."""
    update: dict[str, Any] = {}
    if command.v is None and version is not None:
        update["v"] = version
    if command.caps is None and caps is not None:
        update["caps"] = list(caps)
    return command.model_copy(update=update) if update else command


def seal(
    keypair: Keypair,
    bridge: str,
    plaintext: str,
    *,
    created_at: int,
    kind: int = COMMAND_KIND,
    tags: Sequence[Sequence[str]] | None = None,
    encrypted: bool = True,
) -> VerifiedEvent:
    """Sign one event to the bridge: NIP-44 unless ``encrypted=False``, command tags by default."""
    content = plaintext
    if encrypted:
        content = encrypt(plaintext, ConversationKeyCache(keypair.secret, 1).get(bridge))
    event_tags = command_tags(bridge, created_at) if tags is None else tags
    return sign_event(keypair, kind, content, event_tags, created_at=created_at)


def command_events(
    keypair: Keypair, bridge: str, text: str, *, created_at: int
) -> list[VerifiedEvent]:
    """The event(s) of an encoded command: one, or ``chunk`` fragments sharing ``created_at``."""
    parts = split(text, rng=os.urandom)
    if len(parts) == 1:
        return [seal(keypair, bridge, text, created_at=created_at)]
    tags = fragment_tags(COMMAND_KIND, bridge, created_at)
    return [seal(keypair, bridge, part, created_at=created_at, tags=tags) for part in parts]


async def publish_direct(
    keypair: Keypair, event: VerifiedEvent, relays: Sequence[str], timeout: float
) -> PublishReport:
    """Publish through short-lived connections to ``relays`` only (not the phone's pool)."""

    async def one(url: str) -> PublishOutcome:
        connection = RelayConnection(
            url, keypair, connect_timeout=timeout, ok_timeout=timeout, ping_interval=None
        )
        try:
            await connection.connect()
        except RelayConnectionError as exc:
            return PublishOutcome(url, PublishStatus.NOT_CONNECTED, str(exc))
        try:
            return await connection.publish(event)
        finally:
            await connection.close()

    outcomes = await asyncio.gather(*(one(url) for url in dict.fromkeys(relays)))
    return PublishReport(event.id, tuple(outcomes))


class Outbox:
    """Commands the phone sends by itself, in order, retried until a relay accepts them.

    Args:
        build: turns a command into its signed event (called once per command).
        on_sent: called with each command and its event once a relay accepted it.
        retry_seconds: how long one command is retried before it is given up.
        name: for log lines (the phone's npub prefix).
        errors: where a crash of the sender is recorded (the phone's ``errors`` list).
    """

    def __init__(
        self,
        build: Callable[[Command], VerifiedEvent],
        on_sent: Callable[[Command, VerifiedEvent], None],
        *,
        retry_seconds: float,
        name: str,
        errors: list[str],
    ) -> None:
        self._build = build
        self._on_sent = on_sent
        self.retry_seconds = retry_seconds
        self._name = name
        self._queue: asyncio.Queue[Command] = asyncio.Queue()
        self._pool: RelayPool | None = None
        self._online = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.undelivered: list[Command] = []
        self.errors = errors

    def put(self, command: Command) -> None:
        """Queue a command (never blocks; safe from a relay callback)."""
        self._queue.put_nowait(command)

    def attach(self, pool: RelayPool) -> None:
        """Send through ``pool`` from now on (starts the sender task on first use)."""
        self._pool = pool
        self._online.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"phone-outbox {self._name}")

    async def flush(self, timeout: float) -> None:
        """Wait until everything queued was sent or given up (at most ``timeout`` seconds)."""
        try:
            async with asyncio.timeout(timeout):
                await self._queue.join()
        except TimeoutError:
            logger.warning("phone %s: %d commands not flushed", self._name, self._queue.qsize())

    def detach(self) -> None:
        """Stop sending (offline); queued commands wait for the next :meth:`attach`."""
        self._online.clear()
        self._pool = None

    async def close(self) -> None:
        """Stop the sender task (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            command = await self._queue.get()
            try:
                await self._deliver(command)
            except Exception as exc:  # a bug here must show in the test, not end the outbox
                logger.exception("phone %s: sending %s failed", self._name, type(command).__name__)
                self.errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                self._queue.task_done()

    async def _deliver(self, command: Command) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_seconds
        event: VerifiedEvent | None = None
        while loop.time() < deadline:
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0)):
                    await self._online.wait()
            except TimeoutError:
                break
            pool = self._pool
            if pool is None:
                continue
            if event is None:
                event = self._build(command)
            report = await pool.publish(event)
            if report.delivered:
                self._on_sent(command, event)
                return
            await asyncio.sleep(_RETRY_PAUSE_SECONDS)
        logger.warning("phone %s: gave up sending %s", self._name, type(command).__name__)
        self.undelivered.append(command)
