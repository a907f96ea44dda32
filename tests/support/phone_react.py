"""What the phone does with each decoded message: merge state, ack chunks, re-request gaps.

One function, :func:`react`, called by the simulator for every message before it is appended to
the received log (so a test woken by the message already sees its effects). It never awaits:
outgoing commands go to the phone's outbox.

* ``sessions`` → heartbeat merge (bug-B); ``session-pending/ready/failed`` → pending sessions;
* ``output`` → transcript, source ``live``;
* ``sync-begin`` → ties the sync to the oldest request waiting for one;
* ``sync-chunk`` → transcript (source ``sync``), the chunk's range counted as held, and an ack for
  *every* chunk, whatever sync it belongs to (the bridge ignores acks it does not know);
* ``sync-end`` → complete, or re-request at once (at most ``max_rerequests`` times);
* ``pair-ack{ok}`` → its ``relays`` merged into the phone's relay list (deduplicated).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.protocol.messages import (
    OutputMessage,
    PairAckMessage,
    SessionFailedMessage,
    SessionPendingMessage,
    SessionReadyMessage,
    SessionsMessage,
    SyncBeginMessage,
    SyncChunkMessage,
    SyncEndMessage,
)
from tests.support.phone_state import ContractViolation, Received
from tests.support.phone_sync import SyncOutcome

if TYPE_CHECKING:
    from tests.support.phone_core import PhoneCore

__all__ = ["react"]


def _chunk(phone: PhoneCore, chunk: SyncChunkMessage) -> list[str]:
    problems: list[str] = []
    low, high = chunk.range
    for item in chunk.entries:
        if not low <= item.seq <= high:
            problems.append(f"entry seq {item.seq} outside the chunk range [{low}, {high}]")
        phone.transcripts.insert(chunk.sessionId, item.seq, item.entry, "sync")
    phone.transcripts.cover(chunk.sessionId, chunk.range)
    phone.ack_chunk(chunk)
    return problems


def react(phone: PhoneCore, received: Received[Any]) -> list[ContractViolation]:
    """Apply one message to the phone; returns contract violations found on the way."""
    message = received.message
    problems: list[str] = []
    match message:
        case SessionsMessage():
            phone.book.apply_heartbeat(message, received.created_at)
        case OutputMessage():
            phone.transcripts.insert(message.sessionId, message.seq, message.entry, "live")
        case SyncBeginMessage():
            tracker = phone.syncs.get(message.sessionId)
            if tracker is not None and not tracker.done:
                tracker.on_begin(message.syncId, message.seqHigh)
        case SyncChunkMessage():
            problems = _chunk(phone, message)
        case SyncEndMessage():
            tracker = phone.syncs.get(message.sessionId)
            if (
                tracker is not None
                and tracker.on_end(message.syncId, message.deliveredRanges) is SyncOutcome.REREQUEST
            ):
                phone.request_sync(tracker)
        case SessionPendingMessage():
            phone.book.apply_pending(message)
        case SessionReadyMessage():
            phone.book.apply_ready(message)
        case SessionFailedMessage():
            phone.book.apply_failed(message)
        case PairAckMessage():
            if message.ok and message.relays:
                phone.merge_relays(message.relays)
        case _:
            pass  # acks and replies: the received log is all a test needs
    return [
        ContractViolation(received.event_id, received.kind, message.type, problem)
        for problem in problems
    ]
