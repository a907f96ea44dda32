"""NIP-01 events (shape, id, BIP-340 signature) and NIP-40 expiration.

Trust is a type: :func:`parse_event` turns untrusted JSON into an :class:`Event` after checking
its *shape* only; :func:`check_event` (or :func:`sign_event`, for our own events) is the only
producer of :class:`VerifiedEvent`, whose id was recomputed from the content and whose signature
was checked. Code that needs trust accepts only ``VerifiedEvent``.

The id is ``sha256`` of the compact JSON ``[0,pubkey,created_at,kind,tags,content]`` with UTF-8
kept as is (NIP-01). orjson writes exactly the bytes of ``json.dumps(separators=(",", ":"),
ensure_ascii=False)`` for every string (controls as ``\\uXXXX``/short escapes, U+2028 raw, non-BMP
raw) and is several times faster. Strings with lone surrogates have no UTF-8 form, so no id: events
carrying them are rejected (``json.loads`` lets ``"\\ud800"`` through; ``orjson.loads`` does not).

NIP-40: an event with ``["expiration", "<unix seconds>"]`` is expired when ``now >= expiration``
(the timestamp is the first second at which the event is no longer valid). Only the first
``expiration`` tag counts; a malformed value (not plain decimal digits) counts as no expiration,
like a missing tag, since the tag is advisory and the bridge applies its own staleness window.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NewType

import orjson

from bridge.nostr.keys import Keypair, NostrKeyError, parse_pubkey, verify_schnorr
from bridge.records import record

__all__ = [
    "CHECKED_SIGNATURES_KEPT",
    "MAX_CREATED_AT",
    "MAX_KIND",
    "Event",
    "EventId",
    "InvalidEventError",
    "VerifiedEvent",
    "check_event",
    "checked_signatures",
    "event_id",
    "expiration_of",
    "expiration_tag",
    "is_expired",
    "parse_event",
    "sign_event",
    "verify_event",
]

EventId = NewType("EventId", str)
"""An event id: 64 lowercase hex characters."""

MAX_KIND = 65535
"""NIP-01: kinds are integers between 0 and 65535."""

MAX_CREATED_AT = 2**64 - 1
"""``created_at`` is a u64 for relays (strfry, rust-nostr); orjson serializes up to this."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX128 = re.compile(r"[0-9a-f]{128}")
_FIELDS = ("id", "pubkey", "created_at", "kind", "tags", "content", "sig")

CHECKED_SIGNATURES_KEPT = 4096
"""How many ``(id, sig)`` pairs :class:`_CheckedSignatures` remembers (about 1.5 MB)."""


class _CheckedSignatures:
    """The ``(id, sig)`` pairs this process signed or verified lately: each is checked once.

    An event often crosses this process twice: the daemon signs a reply and its embedded relay, in
    the same process, verifies it; a phone's command is verified by that relay and again by the
    daemon that reads it. A BIP-340 verification is the dearest step of either (an order of
    magnitude above the id of a 1 KB event); the second check of a pair is skipped. Only the
    signature check is: the id is always recomputed from the content, and the pair is only
    remembered after a check passed or after our own signing (which verifies what it produced), so a
    remembered pair is a valid signature over that id, and the id covers the pubkey and every other
    field. Bounded: the oldest pairs are forgotten first.

    Shared by the daemon's thread and its embedded relay's: a lookup is one dictionary read,
    and changes hold a lock (forgetting the oldest pair is a read and a delete).
    """

    __slots__ = ("_lock", "_pairs")

    def __init__(self) -> None:
        self._pairs: dict[tuple[str, str], None] = {}
        self._lock = threading.Lock()

    def __contains__(self, pair: tuple[str, str]) -> bool:
        return pair in self._pairs

    def add(self, pair: tuple[str, str]) -> None:
        with self._lock:
            pairs = self._pairs
            if pair in pairs:
                return
            if len(pairs) >= CHECKED_SIGNATURES_KEPT:
                del pairs[next(iter(pairs))]
            pairs[pair] = None

    def clear(self) -> None:
        with self._lock:
            self._pairs.clear()


checked_signatures = _CheckedSignatures()
"""This process's memo (tests clear it to time or exercise a first check)."""


class InvalidEventError(ValueError):
    """An event is malformed, or its id or signature does not check out. The message says which."""


@record
class Event:
    """A NIP-01 event whose shape is known to be right, but which is not (yet) trusted."""

    id: str
    pubkey: str
    created_at: int
    kind: int
    tags: tuple[tuple[str, ...], ...]
    content: str
    sig: str

    def to_dict(self) -> dict[str, Any]:
        """The NIP-01 JSON object (tags as lists)."""
        return {
            "id": self.id,
            "pubkey": self.pubkey,
            "created_at": self.created_at,
            "kind": self.kind,
            "tags": [list(tag) for tag in self.tags],
            "content": self.content,
            "sig": self.sig,
        }

    def to_json(self) -> str:
        """Compact JSON, as sent to relays."""
        try:
            return orjson.dumps(self.to_dict()).decode()
        except orjson.JSONEncodeError:
            raise InvalidEventError("event is not serializable (lone surrogate?)") from None

    @classmethod
    def from_dict(cls, obj: object) -> Event:
        """Same as :func:`parse_event`."""
        return parse_event(obj)


@record
class VerifiedEvent(Event):
    """An event whose id and signature were checked. Build it only via check/sign functions."""


# --- shape --------------------------------------------------------------------------------------


def _has_lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _int_failure(name: str, value: object, maximum: int) -> str | None:
    if type(value) is not int:  # bool is an int subclass and not an acceptable kind/time
        return f"{name} must be an integer"
    if not 0 <= value <= maximum:
        return f"{name} out of range (0..{maximum})"
    return None


def _tags_failure(tags: object, *, check_text: bool) -> str | None:
    if not isinstance(tags, list | tuple):
        return "tags must be an array"
    for tag in tags:
        if not isinstance(tag, list | tuple):
            return "each tag must be an array of strings"
        for item in tag:
            if not isinstance(item, str):
                return "each tag must be an array of strings"
            if check_text and _has_lone_surrogate(item):
                return "tag contains a lone surrogate"
    return None


def _shape_failure(
    id_: object,
    pubkey: object,
    created_at: object,
    kind: object,
    tags: object,
    content: object,
    sig: object,
    *,
    check_text: bool,
) -> str | None:
    if not isinstance(id_, str) or not _HEX64.fullmatch(id_):
        return "id must be 64 lowercase hex characters"
    if not isinstance(pubkey, str) or not _HEX64.fullmatch(pubkey):
        return "pubkey must be 64 lowercase hex characters"
    if not isinstance(sig, str) or not _HEX128.fullmatch(sig):
        return "sig must be 128 lowercase hex characters"
    failure = _int_failure("created_at", created_at, MAX_CREATED_AT) or _int_failure(
        "kind", kind, MAX_KIND
    )
    if failure:
        return failure
    if not isinstance(content, str):
        return "content must be a string"
    if check_text and _has_lone_surrogate(content):
        return "content contains a lone surrogate"
    return _tags_failure(tags, check_text=check_text)


def parse_event(obj: object) -> Event:
    """Check the shape of a decoded NIP-01 event object and build an :class:`Event`.

    Checks types, 64/128 lowercase hex, integer ranges, tags as arrays of strings and the
    absence of lone surrogates. Unknown extra fields are ignored. Does NOT check id or signature.

    Raises:
        InvalidEventError: saying which field is wrong.
    """
    if not isinstance(obj, Mapping):
        raise InvalidEventError("event must be a JSON object")
    for name in _FIELDS:
        if name not in obj:
            raise InvalidEventError(f"event has no {name!r} field")
    tags = obj["tags"]
    failure = _shape_failure(
        obj["id"],
        obj["pubkey"],
        obj["created_at"],
        obj["kind"],
        tags,
        obj["content"],
        obj["sig"],
        check_text=True,
    )
    if failure:
        raise InvalidEventError(failure)
    return Event(
        id=obj["id"],
        pubkey=obj["pubkey"],
        created_at=obj["created_at"],
        kind=obj["kind"],
        tags=tuple(tuple(tag) for tag in tags),
        content=obj["content"],
        sig=obj["sig"],
    )


# --- id, signing, verification ------------------------------------------------------------------


def _id_digest(
    pubkey: str, created_at: int, kind: int, tags: Sequence[Sequence[str]], content: str
) -> bytes:
    try:
        serialized = orjson.dumps([0, pubkey, created_at, kind, tags, content])
    except orjson.JSONEncodeError:
        raise InvalidEventError("content or tags are not serializable (lone surrogate?)") from None
    return hashlib.sha256(serialized).digest()


def event_id(
    pubkey: str, created_at: int, kind: int, tags: Sequence[Sequence[str]], content: str
) -> EventId:
    """NIP-01 id: hex sha256 of the compact ``[0,pubkey,created_at,kind,tags,content]``.

    Raises:
        InvalidEventError: a string holds a lone surrogate (it has no UTF-8 form).
    """
    return EventId(_id_digest(pubkey, created_at, kind, tags, content).hex())


def sign_event(
    keypair: Keypair,
    kind: int,
    content: str,
    tags: Sequence[Sequence[str]] = (),
    *,
    created_at: int,
    aux: bytes | None = None,
) -> VerifiedEvent:
    """Build and BIP-340-sign an event.

    Args:
        keypair: the author.
        kind: 0..65535.
        content: any text without lone surrogates.
        tags: arrays of strings.
        created_at: unix seconds; a parameter, so callers control time (sans-I/O).
        aux: 32 bytes of aux randomness for BIP-340; ``None`` (the default) draws fresh bytes.

    Raises:
        InvalidEventError: bad kind, created_at, tags or content.
    """
    failure = (
        _int_failure("kind", kind, MAX_KIND)
        or _int_failure("created_at", created_at, MAX_CREATED_AT)
        or (None if isinstance(content, str) else "content must be a string")
        or _tags_failure(tags, check_text=False)
    )
    if failure:
        raise InvalidEventError(failure)
    frozen_tags = tuple(tuple(tag) for tag in tags)
    pubkey = keypair.public_hex
    digest = _id_digest(pubkey, created_at, kind, frozen_tags, content)
    sig = keypair.sign_schnorr(digest, aux).hex()
    id_hex = digest.hex()
    checked_signatures.add((id_hex, sig))  # sign_schnorr verified it before returning
    return VerifiedEvent(
        id=id_hex,
        pubkey=pubkey,
        created_at=created_at,
        kind=kind,
        tags=frozen_tags,
        content=content,
        sig=sig,
    )


def _failure(event: Event) -> str | None:
    """Why ``event`` is not authentic, or None. Never raises for any field values."""
    if not isinstance(event, Event):
        return "not an event"
    failure = _shape_failure(
        event.id,
        event.pubkey,
        event.created_at,
        event.kind,
        event.tags,
        event.content,
        event.sig,
        check_text=False,  # orjson refuses lone surrogates while computing the id below
    )
    if failure:
        return failure
    try:
        digest = _id_digest(event.pubkey, event.created_at, event.kind, event.tags, event.content)
    except InvalidEventError as exc:
        return str(exc)
    if digest.hex() != event.id:
        return "id does not match the event content"
    pair = (event.id, event.sig)
    if pair in checked_signatures:
        return None
    if verify_schnorr(bytes.fromhex(event.pubkey), digest, bytes.fromhex(event.sig)):
        checked_signatures.add(pair)
        return None
    try:
        parse_pubkey(event.pubkey)
    except NostrKeyError:
        return "pubkey is not a point on secp256k1"
    return "invalid signature"


def verify_event(event: Event) -> bool:
    """True when the id matches the content and the signature is valid. Never raises."""
    try:
        return _failure(event) is None
    except Exception:  # belt and braces: a verifier must answer, not crash, on hostile input
        return False


def check_event(event: Event) -> VerifiedEvent:
    """Verify ``event`` and return it as a :class:`VerifiedEvent`.

    Raises:
        InvalidEventError: saying which check failed (shape, id, pubkey or signature).
    """
    failure = _failure(event)
    if failure:
        raise InvalidEventError(failure)
    if type(event) is VerifiedEvent:
        return event
    return VerifiedEvent(
        id=event.id,
        pubkey=event.pubkey,
        created_at=event.created_at,
        kind=event.kind,
        tags=tuple(tuple(tag) for tag in event.tags),
        content=event.content,
        sig=event.sig,
    )


# --- NIP-40 -------------------------------------------------------------------------------------


def expiration_of(event: Event) -> int | None:
    """The NIP-40 expiration timestamp of ``event``, or None (no tag, or a malformed value)."""
    for tag in event.tags:
        if len(tag) >= 2 and tag[0] == "expiration":
            value = tag[1]
            if value.isascii() and value.isdigit() and len(value) <= 20:
                number = int(value)
                if number <= MAX_CREATED_AT:
                    return number
            return None
    return None


def is_expired(event: Event, now: int) -> bool:
    """NIP-40: expired when ``now >= expiration`` (``now`` in unix seconds, from the caller)."""
    expiration = expiration_of(event)
    return expiration is not None and now >= expiration


def expiration_tag(expires_at: int) -> tuple[str, str]:
    """The NIP-40 tag for an event that stops being valid at ``expires_at`` (unix seconds)."""
    failure = _int_failure("expiration", expires_at, MAX_CREATED_AT)
    if failure:
        raise InvalidEventError(failure)
    return ("expiration", str(expires_at))
