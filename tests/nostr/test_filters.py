"""NIP-01 filters: validation, wire form and local matching."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.nostr.event import sign_event
from bridge.nostr.filters import Filter, FilterError, matches_any, parse_filter
from bridge.nostr.keys import Keypair

KEYS = Keypair.from_secret(bytes([9]) * 32)
OTHER = "cd" * 32
PHONE = "ab" * 32
EVENT = sign_event(
    KEYS, 4515, "x", (("p", PHONE), ("expiration", "99")), created_at=1000, aux=bytes(32)
)

MATCH_CASES: list[tuple[str, Filter, bool]] = [
    ("empty", Filter(), True),
    ("id", Filter(ids=(EVENT.id,)), True),
    ("other-id", Filter(ids=(OTHER,)), False),
    ("author", Filter(authors=(OTHER, KEYS.public_hex)), True),
    ("other-author", Filter(authors=(OTHER,)), False),
    ("kind", Filter(kinds=(1, 4515)), True),
    ("other-kind", Filter(kinds=(1,)), False),
    ("since-equal", Filter(since=1000), True),
    ("since-after", Filter(since=1001), False),
    ("until-equal", Filter(until=1000), True),
    ("until-before", Filter(until=999), False),
    ("p-tag", Filter(tags={"p": (OTHER, PHONE)}), True),
    ("p-tag-other", Filter(tags={"p": (OTHER,)}), False),
    ("e-tag-missing", Filter(tags={"e": (PHONE,)}), False),
    ("tag-name-must-match", Filter(tags={"x": ("99",)}), False),
    ("and", Filter(kinds=(4515,), tags={"p": (PHONE,)}, since=999, until=1001), True),
    ("and-one-fails", Filter(kinds=(4515,), tags={"p": (PHONE,)}, since=1001), False),
    ("limit-ignored", Filter(kinds=(4515,), limit=0), True),
    ("empty-list-matches-nothing", Filter(kinds=()), False),
]


@pytest.mark.parametrize(
    ("flt", "expected"), [c[1:] for c in MATCH_CASES], ids=[c[0] for c in MATCH_CASES]
)
def test_matches(flt: Filter, expected: bool) -> None:
    assert flt.matches(EVENT) is expected


def test_matches_any_is_or() -> None:
    assert matches_any([Filter(kinds=(1,)), Filter(kinds=(4515,))], EVENT)
    assert not matches_any([Filter(kinds=(1,)), Filter(since=2000)], EVENT)
    assert not matches_any([], EVENT)


def test_to_dict_and_parse_round_trip() -> None:
    flt = Filter(
        ids=(EVENT.id,),
        authors=(PHONE,),
        kinds=(1,),
        since=1,
        until=2,
        limit=3,
        tags={"p": (PHONE,)},
    )
    wire = flt.to_dict()
    assert wire == {
        "ids": [EVENT.id],
        "authors": [PHONE],
        "kinds": [1],
        "#p": [PHONE],
        "since": 1,
        "until": 2,
        "limit": 3,
    }
    assert parse_filter(wire) == flt
    assert Filter().to_dict() == {}


def test_tags_are_copied_so_the_filter_stays_frozen() -> None:
    tags = {"p": (PHONE,)}
    flt = Filter(tags=tags)
    tags["p"] = (OTHER,)
    assert flt.tags == {"p": (PHONE,)}


BAD_FILTERS: list[tuple[str, dict[str, Any], str]] = [
    ("ids-not-hex", {"ids": ("xyz",)}, "ids must be a tuple of 64-char lowercase hex"),
    ("ids-upper", {"ids": (PHONE.upper(),)}, "ids must be a tuple"),
    ("ids-list", {"ids": [PHONE]}, "ids must be a tuple"),
    ("authors-short", {"authors": ("ab",)}, "authors must be a tuple"),
    ("kind-big", {"kinds": (70000,)}, "kinds must be an integer in 0..65535"),
    ("kind-bool", {"kinds": (True,)}, "kinds must be an integer"),
    ("kinds-list", {"kinds": [1]}, "kinds must be a tuple"),
    ("since-negative", {"since": -1}, "since must be an integer"),
    ("limit-float", {"limit": 1.5}, "limit must be an integer"),
    ("tag-key-long", {"tags": {"pp": (PHONE,)}}, "tag filter key must be a single letter"),
    ("tag-key-digit", {"tags": {"1": ("x",)}}, "single letter"),
    ("tag-values-list", {"tags": {"p": [PHONE]}}, "#p must be a tuple of strings"),
    ("tag-value-long", {"tags": {"d": ("x" * 1025,)}}, "at most 1024"),
]


@pytest.mark.parametrize(
    ("kwargs", "message"), [c[1:] for c in BAD_FILTERS], ids=[c[0] for c in BAD_FILTERS]
)
def test_bad_filters_fail_on_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(FilterError, match=message):
        Filter(**kwargs)


BAD_WIRE: list[tuple[str, object, str]] = [
    ("not-object", [1], "filter must be a JSON object"),
    ("unknown-key", {"search": "x"}, "unknown filter field 'search'"),
    ("long-tag-key", {"#pp": ["x"]}, "unknown filter field '#pp'"),
    ("kinds-strings", {"kinds": ["1"]}, "kinds must be an array of int"),
    ("kinds-bool", {"kinds": [True]}, "kinds must be an array of int"),
    ("ids-not-list", {"ids": PHONE}, "ids must be an array of str"),
    ("since-string", {"since": "1"}, "since must be an integer"),
]


@pytest.mark.parametrize(
    ("obj", "message"), [c[1:] for c in BAD_WIRE], ids=[c[0] for c in BAD_WIRE]
)
def test_parse_filter_refuses(obj: object, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        parse_filter(obj)
