"""A minimal bridge-side publisher, to test the phone simulator without the daemon.

It does what the wire contract says a bridge does to deliver one message, and nothing more:

* kind and tags from :func:`bridge.protocol.kinds.kind_for` / :func:`tags_for` (wire spec §1.3);
* encoded JSON over 40,960 bytes cut by :func:`bridge.protocol.chunking.split` into ``chunk``
  fragments, each its own NIP-44 event of the parent's kind with :func:`fragment_tags`;
* one ``created_at`` per message, shared by its fragments, monotonic: ``max(now, last + 1)``;
* NIP-44 to the one phone the message is for, signed with the bridge's key.

It also reads the phones' commands: a subscription to 4515 addressed to it (``#p``), each
event decrypted with its author's conversation key, reassembled and decoded into
:attr:`FakeBridge.commands`; what does not decrypt or decode goes to :attr:`FakeBridge.rejected`
with the error, so a test can see a phone's garbage arrive.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from bridge.engine.publish import heartbeat_d_tag
from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, Nip44Error, decrypt, encrypt
from bridge.nostr.pool import PublishReport, RelayPool
from bridge.nostr.relay import RelayEventReceived
from bridge.protocol.chunking import Assembler, split
from bridge.protocol.codec import DecodeError, decode_phone_to_bridge, encode
from bridge.protocol.commands import PhoneToBridge
from bridge.protocol.kinds import COMMAND_KIND, fragment_tags, kind_for, tags_for
from bridge.protocol.messages import BridgeToPhone, SessionsMessage
from bridge.protocol.primitives import WireModel
from tests.support.phone_pairing import build_pairing_url
from tests.support.phone_waits import Notifier, Selector, matches

__all__ = [
    "FakeBridge",
    "InboundCommand",
    "RejectedCommand",
]

_SUBSCRIPTION = "fake-bridge-commands"

C = TypeVar("C", bound=WireModel)


@dataclass(frozen=True)  # no slots: a slotted generic dataclass breaks InboundCommand[X](...)
class InboundCommand(Generic[C]):
    """One command the fake bridge received and decoded (the last event, if fragmented)."""

    event: VerifiedEvent
    relay: str
    command: C

    @property
    def author(self) -> str:
        return self.event.pubkey


@dataclass(frozen=True, slots=True)
class RejectedCommand:
    """A 4515 event that did not decrypt or decode, with the error."""

    event: VerifiedEvent
    relay: str
    error: str


class FakeBridge(Notifier):
    """Publishes bridge → phone messages and collects phone → bridge commands.

    Args:
        relays: relay URLs to publish to and read from.
        keypair: the bridge identity (generated when absent).
        machine: the machine name used in pairing URLs.
        clock: unix time, for ``created_at``.
    """

    def __init__(
        self,
        relays: Sequence[str],
        keypair: Keypair | None = None,
        *,
        machine: str = "fake-machine",
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.keypair = keypair or Keypair.generate()
        self.relays = list(relays)
        self.machine = machine
        self._clock = clock
        self._keys = ConversationKeyCache(self.keypair.secret)
        self._assembler = Assembler()
        self._last_created_at = 0
        self.commands: list[InboundCommand[Any]] = []
        self.rejected: list[RejectedCommand] = []
        self._pool = RelayPool(
            self.relays,
            self.keypair,
            on_event=self._on_event,
            on_eose=lambda sub, relay: self.notify(),
            backoff_base=0.2,
            backoff_cap=2.0,
        )

    @property
    def pubkey(self) -> str:
        return self.keypair.public_hex

    @property
    def npub(self) -> str:
        return self.keypair.npub

    async def __aenter__(self) -> FakeBridge:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self, *, timeout: float = 10.0) -> None:
        """Connect and subscribe to the commands addressed to this bridge."""
        await self._pool.subscribe(
            _SUBSCRIPTION,
            lambda: (Filter(kinds=(COMMAND_KIND,), tags={"p": (self.pubkey,)}),),
        )
        await self._pool.start()
        async with asyncio.timeout(timeout):
            await self._pool.wait_open()

    async def close(self) -> None:
        """Close every relay connection (idempotent)."""
        await self._pool.close()

    def pairing_url(self, token: str, *, relays: Sequence[str] | None = None) -> str:
        """A ``codedeck://pair`` URL for this bridge, as the daemon's ``pair`` prints it."""
        return build_pairing_url(self.npub, relays or self.relays, self.machine, token)

    # --- publishing -----------------------------------------------------------------------------

    def next_created_at(self) -> int:
        """Monotonic per process (wire spec §1.2): ``max(now, last + 1)``."""
        self._last_created_at = max(int(self._clock()), self._last_created_at + 1)
        return self._last_created_at

    def build(
        self, message: BridgeToPhone, phone: str, *, created_at: int | None = None
    ) -> list[VerifiedEvent]:
        """The signed event(s) carrying ``message`` to ``phone`` (one, or its fragments).

        Raises:
            ValueError: a heartbeat too large for one event (a 30515 is never fragmented).
        """
        when = self.next_created_at() if created_at is None else created_at
        kind = kind_for(message)
        parts = split(encode(message), rng=os.urandom)
        if len(parts) == 1:
            tags = tags_for(message, phone, when)
            if isinstance(message, SessionsMessage):  # one stored heartbeat per phone
                tags = [
                    ["d", heartbeat_d_tag(message.machine, phone)] if t[0] == "d" else t
                    for t in tags
                ]
            return [self.build_raw(parts[0], phone, kind, tags, when)]
        tags = fragment_tags(kind, phone, when)
        return [self.build_raw(part, phone, kind, tags, when) for part in parts]

    def build_raw(
        self,
        plaintext: str,
        phone: str,
        kind: int,
        tags: Sequence[Sequence[str]],
        created_at: int | None = None,
        *,
        encrypted: bool = True,
    ) -> VerifiedEvent:
        """Any payload on any kind and tags (for garbage and contract-violation tests)."""
        when = self.next_created_at() if created_at is None else created_at
        content = encrypt(plaintext, self._keys.get(phone)) if encrypted else plaintext
        return sign_event(self.keypair, kind, content, tags, created_at=when)

    async def publish(
        self, message: BridgeToPhone, phone: str, *, created_at: int | None = None
    ) -> list[VerifiedEvent]:
        """Build and publish ``message`` to ``phone``; every event must reach a relay.

        Raises:
            RuntimeError: a relay accepted none of the events' copies.
        """
        events = self.build(message, phone, created_at=created_at)
        for event in events:
            await self.publish_event(event)
        return events

    async def publish_event(self, event: VerifiedEvent) -> PublishReport:
        """Publish one pre-built event to every relay (e.g. again, as a duplicate)."""
        report = await self._pool.publish(event)
        if not report.delivered:
            answers = "; ".join(f"{o.relay} {o.status.value} {o.message}" for o in report.outcomes)
            raise RuntimeError(f"fake bridge: event {event.id[:8]} not delivered ({answers})")
        return report

    # --- commands -------------------------------------------------------------------------------

    @overload
    def received(
        self, selector: type[C], predicate: Callable[[C], bool] | None = None, *, after: int = 0
    ) -> list[InboundCommand[C]]: ...
    @overload
    def received(
        self,
        selector: Selector = None,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
    ) -> list[InboundCommand[Any]]: ...
    def received(
        self,
        selector: Selector = None,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
    ) -> list[InboundCommand[Any]]:
        """Decoded commands from index ``after`` on, matching ``selector`` and ``predicate``."""
        return [
            item
            for item in self.commands[after:]
            if matches(selector, item.command) and (predicate is None or predicate(item.command))
        ]

    @overload
    async def wait_command(
        self,
        selector: type[C],
        predicate: Callable[[C], bool] | None = None,
        *,
        after: int = 0,
        count: int = 1,
        timeout: float = 10.0,
    ) -> list[InboundCommand[C]]: ...
    @overload
    async def wait_command(
        self,
        selector: Selector = None,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
        count: int = 1,
        timeout: float = 10.0,
    ) -> list[InboundCommand[Any]]: ...
    async def wait_command(
        self,
        selector: Selector = None,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
        count: int = 1,
        timeout: float = 10.0,
    ) -> list[InboundCommand[Any]]:
        """Wait until ``count`` matching commands arrived; return the first ``count``."""

        def check() -> list[InboundCommand[Any]] | None:
            found = self.received(selector, predicate, after=after)
            return found[:count] if len(found) >= count else None

        return await self.wait_until(check, timeout=timeout, what=f"{count} command(s)")

    def describe_state(self) -> str:
        types = [type(item.command).__name__ for item in self.commands]
        return f"fake bridge got {types} and {len(self.rejected)} rejected event(s)"

    def _on_event(self, delivered: RelayEventReceived) -> None:
        event = delivered.event
        try:
            plaintext = decrypt(event.content, self._keys.get(event.pubkey))
            joined = self._assembler.feed(plaintext, time.monotonic(), sender=event.pubkey)
            if joined is None:
                return  # a fragment of a group still incomplete
            command: PhoneToBridge = decode_phone_to_bridge(joined)
        except (Nip44Error, DecodeError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.rejected.append(RejectedCommand(event, delivered.relay, error))
        else:
            self.commands.append(InboundCommand(event, delivered.relay, command))
        self.notify()
