"""Hypothesis strategies for frames a broken or hostile relay may send (shared by the fuzz tiers)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from bridge.nostr.event import sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair

ALICE = Keypair.from_secret("44" * 32)


SUB = "fuzz"


FILTERS = (Filter(kinds=(1,), authors=(ALICE.public_hex,)),)


GOOD = sign_event(ALICE, 1, "good", (), created_at=1_700_000_000)


FRAME_TYPES = ["EVENT", "OK", "EOSE", "CLOSED", "NOTICE", "AUTH", "COUNT", "REQ", "event", ""]


text = st.text(max_size=40)  # lone surrogates included: the wire can carry "\ud800"


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
    st.sampled_from(["a" * 64, SUB, GOOD.id, "blocked: no"]),
)


values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=10,
)


@st.composite
def mutated_events(draw: st.DrawFn) -> dict[str, Any]:
    """The good event with some fields replaced, removed or added."""
    event: dict[str, Any] = dict(GOOD.to_dict())
    for key in draw(st.lists(st.sampled_from([*event, "extra"]), max_size=3)):
        if draw(st.booleans()):
            event.pop(key, None)
        else:
            event[key] = draw(values)
    return event


@st.composite
def frames(draw: st.DrawFn) -> str | bytes:
    """Frames a broken or hostile relay may send."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.text(max_size=200))
    if kind == 1:
        return draw(st.binary(max_size=200))
    if kind == 2:
        head = draw(st.sampled_from(FRAME_TYPES))
        tail = draw(st.lists(values, max_size=5))
        return json.dumps([head, *tail])
    if kind == 3:
        sub = draw(st.sampled_from([SUB, "other", "", 5]))
        return json.dumps(["EVENT", sub, draw(mutated_events())])
    valid = json.dumps(["OK", GOOD.id, True, ""])
    cut = draw(st.integers(0, len(valid)))
    return valid[:cut] + draw(st.text(max_size=5))
