"""The pairing URL as the phone reads it (wire spec §1.5)."""

from __future__ import annotations

import pytest

from bridge.nostr.keys import Keypair
from tests.support.phone_pairing import (
    PairingInfo,
    PairingUrlError,
    build_pairing_url,
    parse_pairing_url,
)

BRIDGE = Keypair.generate()
TOKEN = "0123456789abcdef0123456789abcdef"


def test_reads_every_field_of_a_bridge_url() -> None:
    url = (
        f"codedeck://pair?npub={BRIDGE.npub}"
        "&relays=wss%3A%2F%2Frelay.example.com,ws%3A%2F%2F127.0.0.1%3A7777"
        f"&machine=dev%20box%20%C3%A9&token={TOKEN}"
    )

    info = parse_pairing_url(url)

    assert info == PairingInfo(
        npub=BRIDGE.npub,
        bridge_pubkey=BRIDGE.public_hex,
        relays=("wss://relay.example.com", "ws://127.0.0.1:7777"),
        machine="dev box é",
        token=TOKEN,
    )


def test_a_comma_inside_a_relay_url_stays_in_that_relay() -> None:
    # encodeURIComponent writes "," as %2C: only the literal commas separate relays.
    url = build_pairing_url(
        BRIDGE.npub, ["wss://r.example/a,b?x=1&y=2", "wss://s.example"], "m", "t"
    )

    assert parse_pairing_url(url).relays == ("wss://r.example/a,b?x=1&y=2", "wss://s.example")


def test_build_then_parse_round_trips_with_optional_fields() -> None:
    url = build_pairing_url(
        BRIDGE.npub,
        ["wss://a.example", "wss://a.example", "ws://[::1]:7777"],
        "Mac (Studio)!",
        TOKEN,
        netid="net 1",
        meshadmin=BRIDGE.npub,
    )

    info = parse_pairing_url(url)

    assert info.relays == ("wss://a.example", "ws://[::1]:7777")  # deduplicated, in order
    assert info.machine == "Mac (Studio)!"
    assert info.netid == "net 1"
    assert info.meshadmin == BRIDGE.npub
    assert "(Studio)!" in url  # encodeURIComponent leaves ( ) ! as they are


def test_unknown_parameters_are_ignored() -> None:
    url = build_pairing_url(BRIDGE.npub, ["wss://a.example"], "m", TOKEN) + "&future=1"

    assert parse_pairing_url(url).token == TOKEN


BAD_URLS = [
    ("https://pair?npub=x", "not a pairing URL"),
    ("codedeck://unpair?npub=x", "not a pairing URL"),
    (f"codedeck://pair?relays=wss%3A%2F%2Fa&machine=m&token={TOKEN}", "has no npub"),
    (f"codedeck://pair?npub={BRIDGE.npub}&machine=m&token={TOKEN}", "has no relays"),
    (f"codedeck://pair?npub={BRIDGE.npub}&relays=wss%3A%2F%2Fa&token={TOKEN}", "has no machine"),
    (f"codedeck://pair?npub={BRIDGE.npub}&relays=wss%3A%2F%2Fa&machine=m", "has no token"),
    (f"codedeck://pair?npub={BRIDGE.npub}&relays=wss%3A%2F%2Fa&machine=m&token=", "has no token"),
    (
        f"codedeck://pair?npub={BRIDGE.npub}&relays=wss%3A%2F%2Fa&machine=%20&token={TOKEN}",
        "has no machine",
    ),
    (
        f"codedeck://pair?npub={BRIDGE.nsec}&relays=wss%3A%2F%2Fa&machine=m&token={TOKEN}",
        "npub is invalid: expected an npub, got an nsec",
    ),
    (
        f"codedeck://pair?npub={BRIDGE.npub}&relays=https%3A%2F%2Fa&machine=m&token={TOKEN}",
        "is not a ws:// or wss:// URL",
    ),
    (
        f"codedeck://pair?npub={BRIDGE.npub}&relays=wss%3A%2F%2Fa,,&machine=m&token={TOKEN}",
        "empty entry",
    ),
    (
        f"codedeck://pair?npub={BRIDGE.npub}&npub={BRIDGE.npub}&relays=wss%3A%2F%2Fa"
        f"&machine=m&token={TOKEN}",
        "'npub' is given twice",
    ),
    (f"codedeck://pair?npub&relays=wss%3A%2F%2Fa&machine=m&token={TOKEN}", "has no value"),
]


@pytest.mark.parametrize(("url", "message"), BAD_URLS, ids=[m for _, m in BAD_URLS])
def test_a_bad_url_is_a_clear_error_that_never_shows_the_token(url: str, message: str) -> None:
    with pytest.raises(PairingUrlError, match=message.replace("(", r"\(")) as caught:
        parse_pairing_url(url)

    assert TOKEN not in str(caught.value)
    assert BRIDGE.nsec not in str(caught.value)


def test_a_non_string_is_refused() -> None:
    with pytest.raises(PairingUrlError, match="expected a pairing URL string, got int"):
        parse_pairing_url(42)  # type: ignore[arg-type]


def test_the_token_is_not_in_the_repr() -> None:
    info = parse_pairing_url(build_pairing_url(BRIDGE.npub, ["wss://a.example"], "m", TOKEN))

    assert TOKEN not in repr(info)


def test_building_without_relays_is_an_error() -> None:
    with pytest.raises(PairingUrlError, match="at least one relay"):
        build_pairing_url(BRIDGE.npub, [], "m", TOKEN)
