"""CodeDeck Web pairs by its link and keeps what it has across a reload (real Chromium)."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

from tests.e2e.web.conftest import Shoot
from tests.e2e.web.steps import (
    WAIT,
    base_url,
    create_session,
    entry_seqs,
    pair,
    send,
    tid,
    wait_entries_match_store,
)
from tests.support.browser import Browser
from tests.support.daemon import DaemonProcess
from tests.support.phone_pairing import parse_pairing_url
from tests.support.web_pairing import open_pairing_link, pairing_link, web_link


async def test_the_pairing_link_pairs_and_the_token_leaves_the_url(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon, label="Chromium 375")
    await shoot(browser, "paired")
    assert "token=" not in await browser.url()  # replaced once read (history.replaceState)
    [phone] = await daemon.call("phones.list")
    assert phone["label"]  # the label typed on the pair screen, or the page's own
    # The key the page made is the one the bridge paired, and it never left IndexedDB's origin.
    assert len(bridge) == 64
    logs = await browser.logs()
    assert not logs.errors, logs.render()
    assert not logs.dialogs, logs.render()


async def test_the_bridge_prints_the_web_link_of_the_shared_format(daemon: DaemonProcess) -> None:
    """``pair``'s web link says what the codedeck:// link says, in the page's fragment format."""
    opened = await daemon.call("pair.open", duration=600)
    web = opened.get("webUrl")
    assert isinstance(web, str), opened.keys()
    ours = web_link(base_url(daemon), opened["url"])
    split, expected = urlsplit(web), urlsplit(ours)
    assert (split.scheme, split.netloc, split.path) == (expected.scheme, expected.netloc, "/")
    assert split.query == ""  # the token stays in the fragment: never sent to a server
    assert parse_qs(split.fragment) == parse_qs(expected.fragment)


async def test_a_reload_keeps_the_key_and_the_transcript(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await send(browser, "lines 5")
    await browser.wait_for(tid("entry"), text="line 5 of 5", timeout=WAIT)
    before = await wait_entries_match_store(browser, daemon, session)
    await browser.reload()
    # No pairing again: the bridge is listed, and the session's rows come back from IndexedDB.
    assert await browser.count(tid("pair-screen")) == 0
    await browser.wait_for(tid("entry"), text="line 5 of 5", timeout=WAIT)
    assert await entry_seqs(browser) == before
    await shoot(browser, "reloaded")
    await browser.wait_for(tid("presence", presence="online"), state="attached", timeout=WAIT)
    # Still the same phone to the bridge: a new input goes through on the restored key.
    await send(browser, "after the reload")
    await browser.wait_for(tid("entry"), text="echo: after the reload", timeout=WAIT)
    await wait_entries_match_store(browser, daemon, session)
    phones = await daemon.call("phones.list")
    assert len(phones) == 1
    # And a page opened at the bare address (no fragment) is the same client.
    await browser.goto(base_url(daemon))
    await browser.wait_for(tid("bridge-item", bridge_id=bridge), timeout=WAIT)


async def test_hosted_apart_the_transcript_shows_from_this_device_while_the_bridge_is_down(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot, static_host: str
) -> None:
    opened = await daemon.call("pair.open", duration=600)
    bridge = parse_pairing_url(opened["url"]).bridge_pubkey
    await open_pairing_link(
        browser, web_link(static_host, opened["url"]), bridge, "Apart", timeout=WAIT
    )
    session = await create_session(browser, bridge)
    await send(browser, "lines 8")
    await browser.wait_for(tid("entry"), text="line 8 of 8", timeout=WAIT)
    before = await wait_entries_match_store(browser, daemon, session)
    # The client writes IndexedDB in batches a tenth of a second apart: a user who reloads has
    # had the page on screen longer than that.
    await asyncio.sleep(0.5)
    daemon.kill()  # the relay goes with it: nothing can be synced now
    await browser.reload()
    await browser.wait_for(tid("entry"), text="line 8 of 8", timeout=WAIT)
    assert await entry_seqs(browser) == before  # from IndexedDB alone
    assert await browser.count(tid("presence", presence="online")) == 0
    assert await browser.count(tid("pair-screen")) == 0
    await shoot(browser, "offline-reload")
    await daemon.start()
    await browser.wait_for(tid("presence", presence="online"), state="attached", timeout=WAIT)
    await send(browser, "back again")
    await browser.wait_for(tid("entry"), text="echo: back again", timeout=WAIT)
    await wait_entries_match_store(browser, daemon, session)


async def test_pairing_by_npub(daemon: DaemonProcess, browser: Browser, shoot: Shoot) -> None:
    await browser.goto(base_url(daemon))
    await browser.wait_for(tid("manual-pair"), state="attached", timeout=WAIT)
    if not await browser.visible(tid("manual-pair-npub")):
        await browser.click(f"{tid('manual-pair')} summary")
    await browser.wait_for(tid("my-npub"), text="npub1", timeout=WAIT)
    mine = (await browser.text(tid("my-npub"))).strip()
    await daemon.call("pair.npub", npub=mine, label="Chromium by npub")
    bridge = daemon.keypair()
    await browser.fill(tid("manual-pair-npub"), bridge.npub)
    await browser.fill(tid("manual-pair-relays"), base_url(daemon).replace("http://", "ws://"))
    await browser.click(tid("manual-pair-submit"))
    item = tid("bridge-item", bridge_id=bridge.public_hex)
    await browser.wait_for(f"{item} {tid('presence', presence='online')}", timeout=WAIT)
    await shoot(browser, "paired-by-npub")
    [phone] = await daemon.call("phones.list")
    assert phone["label"] == "Chromium by npub"


async def test_a_wrong_token_is_refused_and_said(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    link, bridge = await pairing_link(daemon)
    token = link.rsplit("token=", 1)[1].split("&", 1)[0]
    await browser.goto(link.replace(f"token={token}", "token=not-the-token"))
    await browser.wait_for(tid("pair-submit"), timeout=WAIT)
    if await browser.count(tid("pair-label")):
        await browser.fill(tid("pair-label"), "Wrong token")
    await browser.click(tid("pair-submit"))
    await browser.wait_for(tid("pair-error"), timeout=WAIT)
    await shoot(browser, "wrong-token")
    assert await browser.count(tid("bridge-item", bridge_id=bridge)) == 0
    assert await daemon.call("phones.list") == []
