"""What a phone keeps across a restart, to and from the JSON of :mod:`tests.support.phone_store`.

Kept: the identity, the bridge and relays, the stored-event cursor (``lastStoredSeen``), the ids
already seen (so the 4516 replay after a restart is recognised), the merged sessions, the
transcripts with their conflicts, and the logs a test asserts on (received messages, invalid
payloads, contract violations). Not kept: in-flight syncs and fragment groups, which die with the
process as they would in the app.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bridge.nostr.keys import Keypair, NostrKeyError, PubKeyHex, parse_pubkey
from bridge.protocol.codec import DecodeError, decode_bridge_to_phone, encode
from tests.support.phone_state import (
    ContractViolation,
    InvalidPayload,
    Received,
    SessionBook,
    TranscriptBook,
)
from tests.support.phone_store import PhoneStateError

if TYPE_CHECKING:
    from tests.support.phone_core import PhoneCore

__all__ = [
    "Restored",
    "export_state",
    "restore_state",
]


@dataclass(slots=True)
class Restored:
    """A phone's state as loaded from its file."""

    keypair: Keypair
    bridge: PubKeyHex | None
    relays: list[str]
    last_stored_seen: int
    seen: list[str]
    book: SessionBook
    transcripts: TranscriptBook
    received: list[Received[Any]]
    invalid: list[InvalidPayload]
    violations: list[ContractViolation]


def export_state(phone: PhoneCore, seen: list[str]) -> dict[str, Any]:
    """The phone's durable state as a JSON-ready dict (holds the secret key: file mode 0600)."""
    return {
        "secretKey": phone.keypair.secret_hex,
        "bridge": phone.bridge_pubkey,
        "relays": phone.relays,
        "lastStoredSeen": phone.last_stored_seen,
        "seen": seen,
        "sessions": phone.book.to_json(),
        "transcripts": phone.transcripts.to_json(),
        "received": [
            {
                "ids": list(item.event_ids),
                "kind": item.kind,
                "createdAt": item.created_at,
                "relay": item.relay,
                "message": encode(item.message),
            }
            for item in phone.received
        ],
        "invalid": [
            {
                "id": item.event_id,
                "kind": item.kind,
                "createdAt": item.created_at,
                "stage": item.stage,
                "error": item.error,
            }
            for item in phone.invalid
        ],
        "violations": [
            {"id": v.event_id, "kind": v.kind, "type": v.message_type, "problem": v.problem}
            for v in phone.violations
        ],
    }


def restore_state(saved: dict[str, Any], keypair: Keypair | None) -> Restored:
    """Rebuild a phone's state from a loaded state document.

    Raises:
        PhoneStateError: a field is missing or malformed, or ``keypair`` is not the saved one.
    """
    try:
        saved_keys = Keypair.from_secret(saved["secretKey"])
        if keypair is not None and keypair != saved_keys:
            raise PhoneStateError("the keypair given differs from the one in the phone state")
        bridge = saved["bridge"]
        received: list[Received[Any]] = []
        for index, item in enumerate(saved["received"]):
            ids = tuple(item["ids"])
            received.append(
                Received(
                    decode_bridge_to_phone(item["message"]),
                    ids[-1],
                    ids,
                    item["kind"],
                    item["createdAt"],
                    item["relay"],
                    index,
                    restored=True,
                )
            )
        return Restored(
            keypair=saved_keys,
            bridge=parse_pubkey(bridge) if bridge is not None else None,
            relays=[str(url) for url in saved["relays"]],
            last_stored_seen=int(saved["lastStoredSeen"]),
            seen=[str(event_id) for event_id in saved["seen"]],
            book=SessionBook.from_json(saved["sessions"]),
            transcripts=TranscriptBook.from_json(saved["transcripts"]),
            received=received,
            invalid=[
                InvalidPayload(i["id"], i["kind"], i["createdAt"], i["stage"], i["error"])
                for i in saved["invalid"]
            ],
            violations=[
                ContractViolation(v["id"], v["kind"], v["type"], v["problem"])
                for v in saved["violations"]
            ],
        )
    except PhoneStateError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, NostrKeyError, DecodeError) as exc:
        # The text names the problem, never a value (the document holds a secret key).
        detail = f"no {exc.args[0]!r} field" if isinstance(exc, KeyError) else type(exc).__name__
        raise PhoneStateError(f"phone state is malformed: {detail}") from None
