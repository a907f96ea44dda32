"""The pairing window and the budget of negative answers (REFERENCE-BEHAVIOUR §1.8).

Rules:

- A window is opened by the operator (``codedeck-bridge pair``) for 10 minutes by default, with a
  fresh 16-byte token. Opening a window replaces any open one. It closes when it expires, when a
  phone pairs through it, or when the daemon stops.
- While it is open the bridge also listens to 4515 events from *any* author addressed to it, with
  ``since = window start − 5`` fixed for the whole window (so a re-subscribe replays the gap).
- The token is compared in constant time. Identity is the event author, never the payload.
- Negative answers (``window-closed``, ``bad-token``) are limited to 5 per fixed 10-minute window;
  past that, rejections are dropped unanswered, so a stranger cannot use the bridge as a free
  relay-write amplifier.

Pure: the clock is the ``now`` argument (unix seconds).
"""

from __future__ import annotations

import hmac

from bridge.engine.effects import (
    Commit,
    DeletePhone,
    DeletePushSubscriptions,
    Dropped,
    Effect,
    Notify,
    PairedPhone,
    Publish,
    Resubscribe,
    SavePhone,
)
from bridge.engine.heartbeat import Heartbeat
from bridge.engine.host import EngineConfig
from bridge.engine.ingest import Decoded
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.sessions.attachments import Attachments
from bridge.engine.sync import SyncServer
from bridge.engine.timefmt import iso
from bridge.nostr.filters import Filter
from bridge.nostr.keys import hex_to_npub
from bridge.protocol import PairAckMessage, PairRequestCommand
from bridge.protocol.kinds import COMMAND_KIND
from bridge.records import record

__all__ = [
    "DEFAULT_WINDOW_SECONDS",
    "NACK_BUDGET",
    "NACK_PERIOD_SECONDS",
    "NackBudget",
    "Pairing",
    "PairingWindow",
    "check_token",
]

DEFAULT_WINDOW_SECONDS = 600.0
NACK_BUDGET = 5
NACK_PERIOD_SECONDS = 600.0
SINCE_GRACE_SECONDS = 5


@record
class PairingWindow:
    """An open window: its token and its lifetime in unix seconds."""

    token: str
    opened_at: float
    expires_at: float

    def is_open(self, now: float) -> bool:
        return self.opened_at <= now < self.expires_at

    @property
    def since(self) -> int:
        """The pairing subscription's fixed ``since``."""
        return int(self.opened_at) - SINCE_GRACE_SECONDS


def check_token(window: PairingWindow, token: str) -> bool:
    """Constant-time comparison of the offered token with the window's."""
    return hmac.compare_digest(window.token.encode(), token.encode())


class NackBudget:
    """At most `budget` negative pair-acks per fixed period of `period` seconds."""

    def __init__(self, budget: int = NACK_BUDGET, period: float = NACK_PERIOD_SECONDS) -> None:
        self._budget = budget
        self._period = period
        self._period_start: float | None = None
        self._used = 0

    def take(self, now: float) -> bool:
        """Spend one negative answer; False when the budget of this period is exhausted."""
        if self._period_start is None or now - self._period_start >= self._period:
            self._period_start = now
            self._used = 0
        if self._used >= self._budget:
            return False
        self._used += 1
        return True


class Pairing:
    """Pairing as the engine runs it: the window, pair-requests, manual pairing and unpairing.

    A phone pairs through an open window (``pair-request`` with the window's token) or because
    the operator vouched for its key (``pair --npub``). Either way it is saved, the command
    subscription is rebuilt for the new author, the heartbeat goes out (now to the new phone
    too) and local listeners hear ``paired``. Unpairing forgets the phone and its syncs; nothing
    more is published to it, and its syncs and uploads in flight are dropped.
    """

    def __init__(
        self,
        config: EngineConfig,
        phones: PhoneBook,
        heartbeat: Heartbeat,
        sync: SyncServer,
        attachments: Attachments,
    ) -> None:
        self._config = config
        self._phones = phones
        self._heartbeat = heartbeat
        self._sync = sync
        self._attachments = attachments
        self._nacks = NackBudget()
        self.window: PairingWindow | None = None

    def window_for(self, now: float) -> PairingWindow | None:
        """The window, if one is open at `now`."""
        return self.window if self.window is not None and self.window.is_open(now) else None

    def filters(self, now: float) -> list[Filter]:
        """The pairing subscription (no authors); empty when no window is open."""
        window = self.window_for(now)
        if window is None:
            return []
        return [
            Filter(
                kinds=(COMMAND_KIND,),
                since=max(0, window.since),
                tags={"p": (self._config.bridge_pubkey,)},
            )
        ]

    def next_deadline(self) -> float | None:
        return self.window.expires_at if self.window is not None else None

    def open_window(self, token: str, duration: float, now: float) -> list[Effect]:
        """The operator opened a window (it replaces any open one)."""
        self.window = PairingWindow(token, now, now + duration)
        return [Resubscribe()]

    def close_window(self) -> None:
        """Shutdown: the window closes with the daemon."""
        self.window = None

    def tick(self, now: float) -> list[Effect]:
        if self.window is None or self.window.is_open(now):
            return []
        self.window = None
        return [Resubscribe(), Notify("pairing-closed", {"reason": "expired"})]

    def on_pair_request(
        self, command: PairRequestCommand, admitted: Decoded, now: float
    ) -> list[Effect]:
        """A ``pair-request`` (from a stranger, or a paired phone pairing again)."""
        author = admitted.author
        if admitted.stale:
            return [Dropped("stale pair-request", admitted.event_id)]
        window = self.window_for(now)
        reason: str | None = None
        if window is None:
            reason = "window-closed"
        elif not check_token(window, command.token):
            reason = "bad-token"
        if reason is not None:
            if not self._nacks.take(now):
                return [
                    Dropped(
                        f"pair-request refused ({reason}); nack budget spent", admitted.event_id
                    )
                ]
            nack = PairAckMessage(machine=self._config.machine, ok=False, reason=reason)
            return [
                Commit((), outbox=(Publish(nack, (author,)),)),
                Dropped(f"pair-request refused ({reason})", admitted.event_id, author),
            ]
        self.window = None
        ack = PairAckMessage(
            machine=self._config.machine,
            ok=True,
            relays=list(self._config.relays),
            host=self._config.host,
        )
        return self.pair(author, command.label or "Phone", now, reply=ack)

    def pair(
        self, pubkey: str, label: str, now: float, *, reply: PairAckMessage | None = None
    ) -> list[Effect]:
        """Save the phone (a pairing again keeps its first ``paired_at``); `reply` goes to it."""
        existing = self._phones.get(pubkey)
        phone = PairedPhone(
            pubkey=pubkey,
            npub=hex_to_npub(pubkey),
            label=label.strip() or "Phone",
            paired_at=existing.paired_at if existing is not None else iso(now),
        )
        self._phones.put(phone)
        outbox = (Publish(reply, (pubkey,)),) if reply is not None else ()
        return [
            Commit((SavePhone(phone),), outbox=outbox),
            Resubscribe(),
            *self._heartbeat.publish(now),
            Notify("paired", {"npub": phone.npub, "label": phone.label}),
        ]

    def unpair(self, pubkey: str, now: float) -> list[Effect]:
        if self._phones.remove(pubkey) is None:
            return []
        self._sync.abort_phone(pubkey)
        self._attachments.abort_phone(pubkey)
        # Its push subscriptions go with it: an unpaired phone is never woken again.
        forget = (DeletePhone(pubkey), DeletePushSubscriptions(pubkey))
        return [Commit(forget), Resubscribe(), *self._heartbeat.publish(now)]
