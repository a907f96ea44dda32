"""CodeDeck Web pairs by its link and keeps what it has across a reload (real Chromium)."""

from __future__ import annotations

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
