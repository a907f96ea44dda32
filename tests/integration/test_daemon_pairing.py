"""Pairing against the real daemon: QR window, bad tokens, the nack budget, npub pairing, unpair."""

from __future__ import annotations

import asyncio

import pytest

from bridge.nostr.keys import Keypair
from bridge.protocol import InputCommand, PairRequestCommand, RefreshSessionsCommand
from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.phone_pairing import parse_pairing_url
from tests.support.relay import LoopbackRelay


async def test_pair_json_then_phones_and_status_show_the_phone(
    daemon: DaemonProcess, relay: LoopbackRelay
) -> None:
    opened = await daemon.call("pair.open", duration=600)
    info = parse_pairing_url(opened["url"])
    assert info.machine == "testbox" and list(info.relays) == [relay.url]
    assert info.token == opened["token"] and len(opened["token"]) == 32
    async with PhoneSimulator(relays=[relay.url], label="Pixel 9") as phone:
        waiter = asyncio.create_task(daemon.call("pair.wait", timeout=30))
        ack = await phone.pair(opened["url"])
        assert ack.message.ok and ack.message.relays == [relay.url] and ack.message.host == "cli"
        waited = await waiter
        assert waited == {"paired": True, "label": "Pixel 9", "npub": phone.npub}
        phones = await daemon.call("phones.list")
        assert [(p["npub"], p["label"]) for p in phones] == [(phone.npub, "Pixel 9")]
        status = await daemon.call("status")
        assert status["npub"] == daemon.keypair().npub and len(status["phones"]) == 1
        beat = await phone.wait_for("sessions")
        assert beat.message.machine == "testbox"


async def test_bad_token_is_refused_and_the_budget_caps_answers(
    daemon: DaemonProcess, relay: LoopbackRelay
) -> None:
    opened = await daemon.call("pair.open", duration=600)
    good = parse_pairing_url(opened["url"])
    stranger = PhoneSimulator(relays=[relay.url], bridge=good.bridge_pubkey)
    async with stranger:
        mark = stranger.mark()
        for n in range(7):
            request = PairRequestCommand(
                npub=stranger.npub, pubkeyHex=stranger.pubkey, label="x", token=f"{n:032x}"
            )
            await stranger.send(request)
        nacks = await stranger.wait_for_count("pair-ack", 5, after=mark, timeout=20)
        assert {n.message.reason for n in nacks} == {"bad-token"}
        await stranger.quiesce(idle=1.0)
        assert stranger.count("pair-ack", after=mark) == 5  # the 6th and 7th are not answered
    assert await daemon.call("phones.list") == []


async def test_window_closed_for_a_paired_phone(phone: PhoneSimulator) -> None:
    mark = phone.mark()
    request = PairRequestCommand(
        npub=phone.npub, pubkeyHex=phone.pubkey, label="again", token="0" * 32
    )
    await phone.send(request)
    nack = await phone.wait_for("pair-ack", after=mark)
    assert nack.message.ok is False and nack.message.reason == "window-closed"


async def test_expired_window_pairs_nobody(daemon: DaemonProcess, relay: LoopbackRelay) -> None:
    opened = await daemon.call("pair.open", duration=1)
    assert (await daemon.call("pair.wait", timeout=10))["reason"] == "expired"
    async with PhoneSimulator(relays=[relay.url]) as phone:
        with pytest.raises(TimeoutError):
            await phone.pair(opened["url"], timeout=3)
    assert await daemon.call("phones.list") == []


async def test_npub_pairing_and_unpair(daemon: DaemonProcess, relay: LoopbackRelay) -> None:
    keys = Keypair.generate()
    bridge_pubkey = daemon.keypair().public_hex
    async with PhoneSimulator(relays=[relay.url], keypair=keys, bridge=bridge_pubkey) as phone:
        result = await daemon.call("pair.npub", npub=keys.npub, label="Tablet")
        assert result["alreadyPaired"] is False
        await phone.wait_for("sessions", timeout=20)
        mark = phone.mark()
        await phone.send(RefreshSessionsCommand())
        await phone.wait_for("sessions", after=mark)

        unpaired = await daemon.call("phones.unpair", npub=keys.npub)
        assert unpaired["unpaired"] is True
        await asyncio.sleep(1.0)  # the daemon resubscribes without this phone
        mark = phone.mark()
        await phone.send(InputCommand(sessionId="any", text="x", inputId="i-1"))
        await phone.send(RefreshSessionsCommand())
        await phone.quiesce(idle=2.0)
        assert phone.messages(after=mark) == []  # nothing more is published to it
    assert await daemon.call("phones.list") == []


async def test_two_phones_both_keep_a_stored_heartbeat(
    daemon: DaemonProcess, relay: LoopbackRelay
) -> None:
    first = await pair_phone(daemon, relay.url, "one")
    second = await pair_phone(daemon, relay.url, "two")
    try:
        await first.go_offline()
        await second.go_offline()
        late = PhoneSimulator(relays=[relay.url], keypair=first.keypair, bridge=first.bridge_pubkey)
        async with late:  # a fresh subscription sees the relay's stored heartbeat for this phone
            beat = await late.wait_for("sessions", timeout=10)
            assert beat.message.machine == "testbox"
            assert late.violations == []
    finally:
        await first.close()
        await second.close()


async def test_pairing_and_commands_through_the_embedded_relay(
    tmp_path: object, workspace: object
) -> None:
    from pathlib import Path

    home = Path(str(tmp_path)) / "home"
    daemon = DaemonProcess(
        home, [], Path(str(workspace)), extra_args=["--embedded-relay", "127.0.0.1:0"]
    )
    async with daemon:
        opened = await daemon.call("pair.open", duration=600)
        info = parse_pairing_url(opened["url"])
        assert len(info.relays) == 1 and info.relays[0].startswith("ws://127.0.0.1:")
        async with PhoneSimulator(relays=list(info.relays)) as phone:
            ack = await phone.pair(opened["url"])  # a stranger's 4515 admitted by the window
            assert ack.message.ok
            await phone.wait_for("sessions")
            mark = phone.mark()
            await phone.send(RefreshSessionsCommand())  # now a registered writer
            await phone.wait_for("sessions", after=mark)
        async with PhoneSimulator(relays=list(info.relays), bridge=info.bridge_pubkey) as stranger:
            from tests.support.phone import PublishFailed

            with pytest.raises(PublishFailed):  # the window closed when the phone paired
                await stranger.send(RefreshSessionsCommand())
