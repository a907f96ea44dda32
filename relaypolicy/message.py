"""strfry's write-policy plugin messages: the request we decide on and the answer we give.

strfry sends one JSON object per event (``docs/plugins.md``)::

    {"type": "new", "event": {...}, "receivedAt": 1700000000,
     "sourceType": "IP4", "sourceInfo": "203.0.113.7", "authed": "<hex>"?}

and expects ``{"id": <event id>, "action": "accept"|"reject"|"shadowReject", "msg": "..."}``.

strfry has already checked the id hash, the signature, the ``created_at`` window, NIP-40 expiry
and the size limits before it asks, so :func:`parse_request` checks only the *shape* the rules
rely on. Anything else would be a second, slower copy of work the relay did. What it does check, it
checks strictly: a request that is not what strfry sends is refused (``invalid:``), never guessed at.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Final, TypeGuard

import orjson

__all__ = [
    "ACCEPT",
    "MAX_MSG_CHARS",
    "Action",
    "Decision",
    "PolicyInput",
    "RequestError",
    "SourceType",
    "first_tag_value",
    "is_hex64",
    "parse_request",
    "recover_event_id",
    "serialize_response",
    "tag_values",
]

#: Longest OK message we send. strfry limits a response line to 8192 bytes; a short cap keeps any
#: future message (which may quote input) far below it even when every character needs escaping.
MAX_MSG_CHARS: Final = 512

_HEX64 = re.compile(r"[0-9a-f]{64}")
# The event id inside a line we could not parse. The look-behind skips ``\"id\":\"…\"`` that is
# merely quoted inside a string (event content), which JSON escapes with a backslash.
_ID_IN_LINE = re.compile(rb'(?<!\\)"id"\s*:\s*"([0-9a-f]{64})"')


class Action(enum.StrEnum):
    """What strfry should do with the event."""

    ACCEPT = "accept"
    REJECT = "reject"
    #: Tell the client OK but neither store nor broadcast (strfry only; unused by our rules).
    SHADOW_REJECT = "shadowReject"


class SourceType(enum.StrEnum):
    """Where strfry got the event from (``sourceType``)."""

    IP4 = "IP4"
    IP6 = "IP6"
    IMPORT = "Import"
    STREAM = "Stream"
    SYNC = "Sync"
    STORED = "Stored"


_SOURCE_TYPES: Final = {member.value: member for member in SourceType}


@dataclass(frozen=True, slots=True)
class Decision:
    """A rule's verdict. ``msg`` is the NIP-01 OK message, with its machine-readable prefix.

    Build rejections with :meth:`reject` so the prefix is always one of the standard ones.
    """

    action: Action
    msg: str = ""

    @property
    def accepted(self) -> bool:
        """True when the event may go on to the relay's write path."""
        return self.action is Action.ACCEPT

    @classmethod
    def reject(cls, prefix: str, text: str) -> Decision:
        """A rejection whose OK message reads ``"<prefix>: <text>"`` (NIP-01 ``OK`` prefixes)."""
        return cls(Action.REJECT, f"{prefix}: {text}")


#: The one accept verdict; rules return this object so the pipeline can test identity cheaply.
ACCEPT: Final = Decision(Action.ACCEPT)


@dataclass(frozen=True, slots=True)
class PolicyInput:
    """The parts of a strfry request the rules look at, already shape-checked.

    Attributes:
        event_id: 64 lowercase hex; echoed back as ``id``.
        pubkey: the event's author, 64 lowercase hex.
        kind: the event kind.
        created_at: the event's ``created_at``.
        tags: the event's tags, as tuples of strings.
        received_at: ``receivedAt``, unix seconds. **This is the rules' clock.**
        source_type: ``sourceType`` (unknown values are kept as ``None``).
        source_info: ``sourceInfo``: the client IP for IP4/IP6, a URL for Stream/Sync, else ``""``.
        authed: the NIP-42 authenticated pubkey when strfry passes one (rarely; see the notes).
    """

    event_id: str
    pubkey: str
    kind: int
    created_at: int
    tags: tuple[tuple[str, ...], ...]
    received_at: int
    source_type: SourceType | None
    source_info: str
    authed: str | None = None


class RequestError(ValueError):
    """A request line that is not a well-formed strfry plugin request.

    Attributes:
        event_id: the event id when it could still be recovered (so the answer can echo it),
            else None.
    """

    def __init__(self, reason: str, event_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.event_id = event_id


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_tags(raw: object, event_id: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(raw, list):
        raise RequestError("event.tags is not a list", event_id)
    for tag in raw:
        if not isinstance(tag, list):
            raise RequestError("event.tags must be lists of strings", event_id)
        for item in tag:
            if not isinstance(item, str):
                raise RequestError("event.tags must be lists of strings", event_id)
    return tuple(map(tuple, raw))


def parse_request(obj: object) -> PolicyInput:
    """Check the shape of one decoded strfry request and extract what the rules need.

    Args:
        obj: the decoded JSON value of one input line.

    Returns:
        The request as a :class:`PolicyInput`.

    Raises:
        RequestError: the request is not what strfry sends; ``event_id`` is set when the event id
            itself was readable, so the caller can still answer with a reject.
    """
    if not isinstance(obj, dict):
        raise RequestError("request is not a JSON object")
    event = obj.get("event")
    if not isinstance(event, dict):
        raise RequestError("request has no event object")
    event_id = event.get("id")
    if not isinstance(event_id, str) or not _HEX64.fullmatch(event_id):
        raise RequestError("event.id is not 64 lowercase hex characters")
    request_type = obj.get("type")
    if request_type != "new":
        raise RequestError("unsupported request type", event_id)
    pubkey = event.get("pubkey")
    if not isinstance(pubkey, str) or not _HEX64.fullmatch(pubkey):
        raise RequestError("event.pubkey is not 64 lowercase hex characters", event_id)
    kind = event.get("kind")
    if not _is_int(kind) or not 0 <= kind <= 65535:
        raise RequestError("event.kind is not an integer in 0..65535", event_id)
    created_at = event.get("created_at")
    if not _is_int(created_at) or created_at < 0:
        raise RequestError("event.created_at is not a non-negative integer", event_id)
    tags = _parse_tags(event.get("tags"), event_id)
    received_at = obj.get("receivedAt")
    if isinstance(received_at, float) and math.isfinite(received_at):
        received_at = int(received_at)
    if not _is_int(received_at) or received_at < 0:
        raise RequestError("receivedAt is not a non-negative number", event_id)
    source_info = obj.get("sourceInfo", "")
    if not isinstance(source_info, str):
        raise RequestError("sourceInfo is not a string", event_id)
    source_type_raw = obj.get("sourceType")
    source_type = _SOURCE_TYPES.get(source_type_raw) if isinstance(source_type_raw, str) else None
    authed = obj.get("authed")
    if authed is not None and (not isinstance(authed, str) or not _HEX64.fullmatch(authed)):
        raise RequestError("authed is not 64 lowercase hex characters", event_id)
    return PolicyInput(
        event_id=event_id,
        pubkey=pubkey,
        kind=kind,
        created_at=created_at,
        tags=tags,
        received_at=received_at,
        source_type=source_type,
        source_info=source_info,
        authed=authed,
    )


def is_hex64(value: object) -> TypeGuard[str]:
    """True for a string of exactly 64 lowercase hex characters (ids, pubkeys)."""
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def recover_event_id(line: bytes) -> str | None:
    """Best-effort: the event id in a line that did not parse, so the reject can echo it.

    Returns the first unescaped ``"id": "<64 hex>"`` in ``line``, or None.
    """
    match = _ID_IN_LINE.search(line)
    return match.group(1).decode("ascii") if match else None


def serialize_response(event_id: str, decision: Decision) -> bytes:
    """One answer line for strfry: minified JSON and a newline.

    ``event_id`` may be ``""`` when the request's id could not be recovered; strfry then reports an
    id mismatch and fails closed, which is right for a request it would never have sent.
    """
    msg = decision.msg if len(decision.msg) <= MAX_MSG_CHARS else decision.msg[:MAX_MSG_CHARS]
    return orjson.dumps({"id": event_id, "action": decision.action.value, "msg": msg}) + b"\n"


def tag_values(msg: PolicyInput, name: str) -> list[str]:
    """The values (second elements) of every ``name`` tag, in order."""
    return [tag[1] for tag in msg.tags if len(tag) >= 2 and tag[0] == name]


def first_tag_value(msg: PolicyInput, name: str) -> str | None:
    """The value of the first ``name`` tag that has one, or None."""
    for tag in msg.tags:
        if len(tag) >= 2 and tag[0] == name:
            return tag[1]
    return None
