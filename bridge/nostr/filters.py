"""NIP-01 subscription filters: a frozen value, its wire form, and local matching.

A :class:`Filter` is what a ``REQ`` carries. The pool keeps the filters each subscription was
sent with and drops any event a relay delivers that matches none of them: NIP-01 leaves
filtering to the relay, but a relay that sends events nobody asked for is a broken or hostile
peer, and checking costs a few attribute reads.

Matching follows NIP-01 exactly: "``since`` <= ``created_at`` <= ``until``", every given field
must match (AND), a list matches when the event's value is any of its members (OR), and
``#x`` matches when some tag named ``x`` has one of the values as its first value. ``limit``
only bounds the stored events a relay returns, so it plays no part in matching.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from bridge.nostr.event import MAX_CREATED_AT, MAX_KIND, Event
from bridge.records import record

__all__ = [
    "Filter",
    "FilterError",
    "matches_any",
    "parse_filter",
]

_HEX64 = re.compile(r"[0-9a-f]{64}")
_TAG_LETTER = re.compile(r"[a-zA-Z]")
_MAX_TAG_VALUE = 1024
_SCALAR_KEYS = ("since", "until", "limit")


class FilterError(ValueError):
    """A filter is malformed. The message says which field is wrong."""


def _check_hex_list(name: str, values: object) -> None:
    if not isinstance(values, tuple) or not all(
        isinstance(value, str) and _HEX64.fullmatch(value) for value in values
    ):
        raise FilterError(f"{name} must be a tuple of 64-char lowercase hex strings")


def _check_int(name: str, value: object, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise FilterError(f"{name} must be an integer in 0..{maximum}")


@record
class Filter:
    """One NIP-01 filter. ``None`` (or an empty ``tags``) means "no constraint".

    ``tags`` maps a single letter to the accepted values, e.g. ``{"p": (pubkey,)}`` for
    ``"#p"``. Values are validated on construction, so a bad filter fails where it is built
    rather than as a relay NOTICE later.
    """

    ids: tuple[str, ...] | None = None
    authors: tuple[str, ...] | None = None
    kinds: tuple[int, ...] | None = None
    since: int | None = None
    until: int | None = None
    limit: int | None = None
    tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.ids is not None:
            _check_hex_list("ids", self.ids)
        if self.authors is not None:
            _check_hex_list("authors", self.authors)
        if self.kinds is not None:
            if not isinstance(self.kinds, tuple):
                raise FilterError("kinds must be a tuple of integers")
            for kind in self.kinds:
                _check_int("kinds", kind, MAX_KIND)
        for name in _SCALAR_KEYS:
            value = getattr(self, name)
            if value is not None:
                _check_int(name, value, MAX_CREATED_AT)
        if not isinstance(self.tags, Mapping):
            raise FilterError("tags must map a letter to a tuple of values")
        for letter, values in self.tags.items():
            if not isinstance(letter, str) or not _TAG_LETTER.fullmatch(letter):
                raise FilterError(f"tag filter key must be a single letter, got {letter!r:.20}")
            if not isinstance(values, tuple) or not all(
                isinstance(value, str) and len(value) <= _MAX_TAG_VALUE for value in values
            ):
                raise FilterError(f"#{letter} must be a tuple of strings (at most 1024 chars)")
        # A private copy: the caller's dict must not be able to change a frozen filter.
        object.__setattr__(self, "tags", dict(self.tags))

    def to_dict(self) -> dict[str, Any]:
        """The NIP-01 JSON object, with only the constrained fields."""
        out: dict[str, Any] = {}
        if self.ids is not None:
            out["ids"] = list(self.ids)
        if self.authors is not None:
            out["authors"] = list(self.authors)
        if self.kinds is not None:
            out["kinds"] = list(self.kinds)
        for letter, values in self.tags.items():
            out["#" + letter] = list(values)
        for name in _SCALAR_KEYS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def matches(self, event: Event) -> bool:
        """True when ``event`` satisfies every constraint of this filter (NIP-01)."""
        if self.ids is not None and event.id not in self.ids:
            return False
        if self.authors is not None and event.pubkey not in self.authors:
            return False
        if self.kinds is not None and event.kind not in self.kinds:
            return False
        if self.since is not None and event.created_at < self.since:
            return False
        if self.until is not None and event.created_at > self.until:
            return False
        for letter, values in self.tags.items():
            if not any(
                len(tag) >= 2 and tag[0] == letter and tag[1] in values for tag in event.tags
            ):
                return False
        return True


def matches_any(filters: Iterable[Filter], event: Event) -> bool:
    """NIP-01: filters of one ``REQ`` are OR-ed."""
    return any(one.matches(event) for one in filters)


def _tuple_of(name: str, value: object, item_type: type) -> tuple[Any, ...]:
    if not isinstance(value, list) or not all(
        isinstance(item, item_type) and not isinstance(item, bool) for item in value
    ):
        raise FilterError(f"{name} must be an array of {item_type.__name__}")
    return tuple(value)


def parse_filter(obj: object) -> Filter:
    """Build a :class:`Filter` from its decoded JSON object (e.g. a ``REQ`` a test server got).

    Unknown keys are an error: a filter field we do not understand would otherwise be
    silently widened to "anything".

    Raises:
        FilterError: saying which field is wrong.
    """
    if not isinstance(obj, Mapping):
        raise FilterError("filter must be a JSON object")
    fields: dict[str, Any] = {}
    tags: dict[str, tuple[str, ...]] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise FilterError("filter keys must be strings")
        if key in ("ids", "authors"):
            fields[key] = _tuple_of(key, value, str)
        elif key == "kinds":
            fields[key] = _tuple_of(key, value, int)
        elif key in _SCALAR_KEYS:
            fields[key] = value
        elif key.startswith("#") and len(key) == 2:
            tags[key[1]] = _tuple_of(key, value, str)
        else:
            raise FilterError(f"unknown filter field {key!r:.24}")
    return Filter(tags=tags, **fields)
