"""Which relay URLs no phone can dial, and the advice ``pair`` prints for them (pure)."""

from __future__ import annotations

import pytest

from bridge.cli.pair_advice import is_local_only, unreachable_relays_advice

LOCAL_ONLY = [
    ("ws://127.0.0.1:7777", True),
    ("ws://127.8.9.10:7777", True),  # all of 127.0.0.0/8
    ("ws://localhost:7777", True),
    ("ws://LOCALHOST:7777", True),  # urlsplit lowers the host
    ("ws://relay.localhost", True),  # RFC 6761: *.localhost is loopback
    ("ws://[::1]:7777", True),
    ("ws://0.0.0.0:7777", True),  # nobody can dial "every address"
    ("ws://[::]:7777", True),
    ("ws://192.168.1.20:7777", False),
    ("ws://10.0.0.5", False),
    ("ws://[fe80::1]:7777", False),
    ("wss://relay.example.org", False),
    ("wss://localhost.example.org", False),
    ("not a url", False),
]


@pytest.mark.parametrize(("url", "local"), LOCAL_ONLY, ids=[u for u, _ in LOCAL_ONLY])
def test_is_local_only(url: str, local: bool) -> None:
    assert is_local_only(url) is local


def test_reachable_links_get_no_advice() -> None:
    assert unreachable_relays_advice([], embedded_url=None, lan="192.168.1.20") is None
    for relays in (["ws://192.168.1.20:7777"], ["ws://127.0.0.1:7000", "wss://nos.lol"]):
        assert unreachable_relays_advice(relays, embedded_url=None, lan=None) is None


def test_the_embedded_relay_advice_uses_its_port_and_the_lan_address() -> None:
    url = "ws://127.0.0.1:9000"
    advice = unreachable_relays_advice([url], embedded_url=url, lan="10.1.2.3")
    assert advice is not None
    assert advice.startswith(f"codedeck-bridge: warning: no phone can reach {url}, the only relay")
    assert 'make run ARGS="--embedded-relay 0.0.0.0:9000"' in advice
    assert 'embedded_relay = "0.0.0.0:9000"' in advice
    assert "`sudo ufw allow 9000/tcp`" in advice
    assert "This machine's LAN address is 10.1.2.3: phones will dial ws://10.1.2.3:9000." in advice
    assert "--relay wss://…" in advice  # the other way is named too
    assert not advice.endswith("\n")


def test_without_a_lan_address_it_says_to_join_the_phones_network() -> None:
    url = "ws://127.0.0.1:7777"
    advice = unreachable_relays_advice([url], embedded_url=url, lan=None)
    assert advice is not None
    assert "no LAN address now: connect it to the phone's network first" in advice
    assert "LAN address is" not in advice


def test_configured_loopback_relays_are_told_to_use_a_reachable_relay() -> None:
    relays = ["ws://localhost:7000", "ws://[::1]:7001"]
    advice = unreachable_relays_advice(relays, embedded_url=None, lan="10.1.2.3")
    assert advice is not None
    first, *rest = advice.splitlines()
    assert first == (
        "codedeck-bridge: warning: no phone can reach ws://localhost:7000, ws://[::1]:7001, the "
        "relays of this pairing link (they listen on this machine only)."
    )
    assert rest[0].startswith("  Use a relay both the phone and this machine can reach")
    assert "--embedded-relay" not in advice  # the embedded relay is not in use
