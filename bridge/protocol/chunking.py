"""Oversize-event fragmentation: the ``chunk`` transport envelope (PROTOCOL-v10-wire.md §3).

Why it exists: relays cap an event's ``content`` at 65,535 bytes, and NIP-44 pads a plaintext of
40,961–49,152 bytes to 49,152, whose ciphertext (65,628 bytes of base64) is over that cap. So a
plaintext above :data:`NIP44_SAFE_PLAINTEXT_BYTES` is cut into fragments, each sent as its own
encrypted event of the parent's kind::

    {"type":"chunk","cid":"<32 hex>","i":0,"n":3,"part":"<slice of the JSON text>"}

This layer sits below the semantic protocol: ``chunk`` is not a member of either message union, and
neither side consults the ``chunked`` capability. Concatenating the ``part`` strings in index order
gives back the original JSON text exactly.

Sender (:func:`split`): a text within the threshold is sent unchanged. Otherwise each slice is the
longest one whose compact envelope (keys ``type, cid, i, n, part``) is at most
:data:`CHUNK_ENVELOPE_BUDGET` UTF-8 bytes, counting the JSON escaping of the slice. Python slices
are code points, so a surrogate pair is never split.

Receiver (:class:`Assembler`):

1. text that does not start with ``{"type":"chunk"`` passes through unchanged;
2. a malformed envelope (including ``i >= n``) passes through too, and then fails normal decode;
3. a group is keyed by (sender, ``cid``); the same key with a different ``n`` restarts the group;
4. a duplicate ``(cid, i)`` is ignored (the first copy wins);
5. a complete group is joined and returned; an incomplete one is dropped
   :data:`CHUNK_ASSEMBLY_TTL_SECONDS` after its first fragment, and partial content never surfaces;
6. at most :data:`MAX_OPEN_GROUPS` groups and :data:`MAX_BUFFERED_BYTES` of ``part`` bytes are held;
   past either limit the oldest group (by when its first fragment was sent) is evicted.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import orjson

__all__ = [
    "CHUNK_ASSEMBLY_TTL_SECONDS",
    "CHUNK_ENVELOPE_BUDGET",
    "CHUNK_ENVELOPE_MARGIN",
    "CHUNK_PREFIX",
    "MAX_BUFFERED_BYTES",
    "MAX_EVENT_CONTENT_BYTES",
    "MAX_OPEN_GROUPS",
    "NIP44_SAFE_PLAINTEXT_BYTES",
    "Assembler",
    "split",
]

MAX_EVENT_CONTENT_BYTES: Final = 65535
NIP44_SAFE_PLAINTEXT_BYTES: Final = 40960
CHUNK_ENVELOPE_MARGIN: Final = 64
CHUNK_ENVELOPE_BUDGET: Final = NIP44_SAFE_PLAINTEXT_BYTES - CHUNK_ENVELOPE_MARGIN
CHUNK_ASSEMBLY_TTL_SECONDS: Final = 60.0
MAX_OPEN_GROUPS: Final = 64
MAX_BUFFERED_BYTES: Final = 8 * 1024 * 1024
CHUNK_PREFIX: Final = '{"type":"chunk"'

_MAX_INDEX: Final = 2**53 - 1


def _inner_size(text: str) -> int:
    """UTF-8 size of ``text`` escaped as in a JSON string (as JSON.stringify), quotes excluded.

    Escaping works character by character, so the size of a concatenation is the sum of the sizes
    of its pieces: that is what lets :func:`_fit` grow a slice piece by piece.
    """
    # orjson escapes exactly as json.dumps(ensure_ascii=False) and JSON.stringify do (checked
    # for every code point by the tests), and returns UTF-8 directly.
    return len(orjson.dumps(text)) - 2


def _prefix(cid_json: str, index: int, count: int) -> str:
    return f'{CHUNK_PREFIX},"cid":{cid_json},"i":{index},"n":{count},"part":'


def _fit(text: str, start: int, room: int) -> int:
    """How many characters from ``start`` fit in ``room`` escaped bytes (the longest slice)."""
    end = len(text)
    # Optimistic first try: the whole window, as if every character took one byte.
    whole = min(end - start, room)
    if _inner_size(text[start : start + whole]) <= room:
        return whole
    # Otherwise grow by pieces that are sure to fit (a character takes at most 6 bytes, `\u001f`),
    # then character by character: linear in the slice, unlike a binary search over re-escapes.
    position = start
    while position < end:
        step = min(room // 6, end - position)
        if step == 0:
            cost = _inner_size(text[position])
            if cost > room:
                break
            room -= cost
            position += 1
        else:
            room -= _inner_size(text[position : position + step])
            position += step
    return position - start


def _slices(text: str, cid_json: str, digits: int) -> list[str]:
    """Cut ``text`` assuming ``n`` is written with ``digits`` digits."""
    placeholder = 10 ** (digits - 1)  # any n with that many digits has the same envelope size
    parts: list[str] = []
    start = 0
    while start < len(text):
        # The envelope around the part: prefix, the part's two quotes, and the closing brace.
        overhead = len(_prefix(cid_json, len(parts), placeholder).encode("utf-8")) + 3
        room = CHUNK_ENVELOPE_BUDGET - overhead
        taken = _fit(text, start, room) if room > 0 else 0
        if taken <= 0:
            raise ValueError("cid too long: no room left for a part in a chunk envelope")
        parts.append(text[start : start + taken])
        start += taken
    return parts


def split(
    json_text: str,
    *,
    cid: str | None = None,
    rng: Callable[[int], bytes] | None = None,
) -> list[str]:
    """Cut an encoded message into ``chunk`` envelopes if it is over the NIP-44 safe size.

    Args:
        json_text: The encoded message (the output of :func:`bridge.protocol.codec.encode`).
        cid: The group id to use. Defaults to 16 bytes from ``rng`` as hex.
        rng: A source of random bytes (e.g. ``secrets.token_bytes``), used when ``cid`` is None.

    Returns:
        ``[json_text]`` when it fits in one event; otherwise the fragment texts, each a compact
        JSON envelope of at most :data:`CHUNK_ENVELOPE_BUDGET` UTF-8 bytes.

    Raises:
        ValueError: The text is not valid Unicode (a lone surrogate), a split is needed but neither
            ``cid`` nor ``rng`` was given, or ``cid`` is empty or too long to leave room for a part.
    """
    try:
        size = len(json_text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("text holds a lone surrogate: it cannot be sent as UTF-8") from None
    if size <= NIP44_SAFE_PLAINTEXT_BYTES:
        return [json_text]
    if cid is None:
        if rng is None:
            raise ValueError("split() needs a cid or an rng for a message that must be chunked")
        cid = rng(16).hex()
    if not cid:
        raise ValueError("cid must not be empty")
    cid_json = orjson.dumps(cid).decode("utf-8")
    # Start from an upper bound of the fragment count (every fragment but the last is filled to
    # within one character, at most 6 bytes), so that one pass usually suffices.
    room = CHUNK_ENVELOPE_BUDGET - len(_prefix(cid_json, 0, 0).encode("utf-8")) - 3 - 2 * 16
    digits = len(str(-(-_inner_size(json_text) // max(room - 6, 1))))
    while True:
        parts = _slices(json_text, cid_json, digits)
        if len(str(len(parts))) == digits:
            break
        digits = len(str(len(parts)))
    count = len(parts)
    return [
        _prefix(cid_json, index, count) + orjson.dumps(part).decode("utf-8") + "}"
        for index, part in enumerate(parts)
    ]


@dataclass(slots=True)
class _Group:
    count: int
    expires_at: float
    sent_at: float
    parts: dict[int, str] = field(default_factory=dict)
    size: int = 0
    tokens: list[object] = field(default_factory=list)


def _envelope(plaintext: str) -> tuple[str, int, int, str] | None:
    """Parse a chunk envelope, or None when it is malformed (it then fails normal decode)."""
    try:
        obj = orjson.loads(plaintext)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("type") != "chunk":
        return None
    cid, index, count, part = obj.get("cid"), obj.get("i"), obj.get("n"), obj.get("part")
    # "int" is a JSON number with an integral value, as everywhere in the protocol.
    if type(index) is float and index.is_integer():
        index = int(index)
    if type(count) is float and count.is_integer():
        count = int(count)
    if not (isinstance(cid, str) and cid and isinstance(part, str)):
        return None
    if type(index) is not int or type(count) is not int:
        return None
    if not (0 <= index < count and 2 <= count <= _MAX_INDEX):
        return None
    return cid, index, count, part


class Assembler:
    """Reassembles ``chunk`` fragments; pure, with the clock passed in.

    Args:
        ttl: Seconds a group may stay incomplete, counted from its first fragment.
        max_groups: Most groups held at once.
        max_bytes: Most ``part`` bytes (UTF-8) held at once, over all groups.

    Attributes:
        evicted_groups: Groups dropped to respect ``max_groups`` / ``max_bytes``.
        expired_groups: Groups dropped because their time-to-live ran out.
        restarted_groups: Groups dropped because a fragment announced a different ``n``.
        duplicate_parts: Fragments ignored because their ``(cid, i)`` was already held.
    """

    def __init__(
        self,
        *,
        ttl: float = CHUNK_ASSEMBLY_TTL_SECONDS,
        max_groups: int = MAX_OPEN_GROUPS,
        max_bytes: int = MAX_BUFFERED_BYTES,
    ) -> None:
        if ttl <= 0 or max_groups < 1 or max_bytes < 1:
            raise ValueError("ttl, max_groups and max_bytes must be positive")
        self._ttl = ttl
        self._max_groups = max_groups
        self._max_bytes = max_bytes
        self._groups: OrderedDict[tuple[str, str], _Group] = OrderedDict()
        self._buffered = 0
        self._given_up: list[object] = []
        self.evicted_groups = 0
        self.expired_groups = 0
        self.restarted_groups = 0
        self.duplicate_parts = 0

    @property
    def open_groups(self) -> int:
        """Number of incomplete groups held."""
        return len(self._groups)

    @property
    def buffered_bytes(self) -> int:
        """UTF-8 bytes of ``part`` text held over all groups."""
        return self._buffered

    def next_deadline(self) -> float | None:
        """When the oldest incomplete group expires, or None when nothing is held."""
        return min((group.expires_at for group in self._groups.values()), default=None)

    def sweep(self, now: float) -> int:
        """Drop every group whose time-to-live has run out; return how many were dropped."""
        expired = [key for key, group in self._groups.items() if group.expires_at <= now]
        for key in expired:
            self._give_up(key)
        self.expired_groups += len(expired)
        return len(expired)

    def feed(self, plaintext: str, now: float, sender: str = "") -> str | None:
        """Take one decrypted event's plaintext; see :meth:`feed_tracked` for the result."""
        return self.feed_tracked(plaintext, now, sender)[0]

    def feed_tracked(
        self,
        plaintext: str,
        now: float,
        sender: str = "",
        token: object = None,
        sent_at: float | None = None,
    ) -> tuple[str | None, tuple[object, ...]]:
        """Take one decrypted event's plaintext, remembering `token` with its fragment.

        Why tokens: the caller must not record a fragment's event as processed until its
        group completes — a crash in between would lose the held parts, and a replayed
        fragment would then be dropped as a duplicate, so the group could never complete.
        The tokens (event ids) come back with the completed message, to be recorded then;
        those of groups that can no longer complete come from :meth:`take_given_up`.

        Args:
            plaintext: The NIP-44 plaintext of an event.
            now: The current monotonic time, in seconds.
            sender: The event author; groups of different senders never mix, so one peer cannot
                inject parts into another's message.
            token: Opaque value kept with this fragment (None keeps nothing).
            sent_at: When the sender made this fragment (its event's ``created_at``); a
                group's age for eviction is that of its oldest fragment (default: `now`).
                Why: after a restart a relay hands back old incomplete groups (a flood of
                them, say) *after* a newer group's first fragment arrived live; by arrival
                order the newer, real group would be the one evicted.

        Returns:
            ``(message, tokens)``: the plaintext itself and ``(token,)`` when it is not a (valid)
            chunk envelope; the joined message and the tokens of every fragment of the group
            when this fragment completes it; ``(None, ())`` while the group is incomplete.
        """
        own = () if token is None else (token,)
        self.sweep(now)
        if not plaintext.startswith(CHUNK_PREFIX):
            return plaintext, own
        envelope = _envelope(plaintext)
        if envelope is None:
            return plaintext, own
        cid, index, count, part = envelope
        key = (sender, cid)
        group = self._groups.get(key)
        if group is not None and group.count != count:
            self._give_up(key)
            self.restarted_groups += 1
            group = None
        age = now if sent_at is None else sent_at
        if group is None:
            group = _Group(count=count, expires_at=now + self._ttl, sent_at=age)
            self._groups[key] = group
        else:
            group.sent_at = min(group.sent_at, age)
        if index in group.parts:
            self.duplicate_parts += 1
            return None, ()
        size = len(part.encode("utf-8"))
        group.parts[index] = part
        group.size += size
        group.tokens.extend(own)
        self._buffered += size
        if len(group.parts) == group.count:
            self._drop(key)
            return "".join(group.parts[i] for i in range(group.count)), tuple(group.tokens)
        while self._groups and (
            len(self._groups) > self._max_groups or self._buffered > self._max_bytes
        ):
            # The oldest by when it was sent; ties (one second) go by arrival, first in first out.
            oldest = min(self._groups, key=lambda k: self._groups[k].sent_at)
            self._give_up(oldest)
            self.evicted_groups += 1
        return None, ()

    def take_given_up(self) -> list[object]:
        """Tokens of the fragments of groups dropped incomplete since the last call.

        Why: such a group can never complete (expired, evicted, or restarted with another
        ``n``), so its fragments' events may now be recorded as processed. Left unrecorded, a
        relay would replay them after every restart for their whole hour, and a flood of
        incomplete groups would evict real ones each time.
        """
        tokens, self._given_up = self._given_up, []
        return tokens

    def _give_up(self, key: tuple[str, str]) -> None:
        self._given_up.extend(self._groups[key].tokens)
        self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        group = self._groups.pop(key)
        self._buffered -= group.size
