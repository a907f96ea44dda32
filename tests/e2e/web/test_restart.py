"""``kill -9`` of the bridge mid-turn: the page reconnects and catches up without a gap.

The embedded relay (and with it the page's websocket) dies with the daemon; the session host
lives on and finishes the turn. Restarted on the same home and port, the bridge publishes what
the host produced meanwhile, and the page, after its reconnect, repairs every gap by sync: in the
end it shows exactly the store's seqs 1..seqHigh, each once, in order.
"""

from __future__ import annotations

import asyncio
import time

from tests.e2e.web.conftest import Shoot
from tests.e2e.web.steps import (
    WAIT,
    create_session,
    entry_seqs,
    pair,
    send,
    tid,
    wait_entries_match_store,
)
from tests.support.browser import Browser
from tests.support.daemon import DaemonProcess

LINES = 3000
"""Long enough that the turn is still streaming when the kill comes."""


async def test_kill_9_mid_turn_then_restart_catches_up_gap_free(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await send(browser, f"lines {LINES}")
    # Mid-turn: some lines are on screen, the last one is not.
    deadline = time.monotonic() + WAIT
    while len(await entry_seqs(browser)) < 20:
        assert time.monotonic() < deadline, "no line of the turn reached the page"
        await asyncio.sleep(0.05)
    daemon.kill()
    shown_at_kill = await entry_seqs(browser)
    assert await browser.count(tid("entry"), text=f"line {LINES} of {LINES}") == 0, (
        "the turn ended before the kill: nothing was mid-turn"
    )
    await browser.wait_for(tid("presence", presence="online"), state="detached", timeout=WAIT)
    await shoot(browser, "bridge-killed")

    await daemon.start()
    await browser.wait_for(tid("presence", presence="online"), state="attached", timeout=WAIT)
    await browser.wait_for(tid("entry"), text=f"line {LINES} of {LINES}", timeout=120)
    shown = await wait_entries_match_store(browser, daemon, session, timeout=120)
    assert len(shown) > len(shown_at_kill)
    assert shown == list(range(1, shown[-1] + 1))  # 1..seqHigh, no gap, no duplicate
    await browser.wait_for(tid("sync-status", syncing="false"), state="attached", timeout=WAIT)
    assert await browser.attr(tid("sync-status"), "data-missing") == "0"
    # The view followed the catch-up to its end (the page never left the bottom).
    gap = await browser.eval(
        "(() => { const t = document.querySelector('[data-testid=transcript]');"
        " return t.scrollHeight - t.scrollTop - t.clientHeight; })()"
    )
    assert gap < 48, f"the transcript stopped {gap} px above its end after the catch-up"
    await shoot(browser, "caught-up")
    # And the session goes on live after the catch-up.
    await send(browser, "after the restart")
    await browser.wait_for(tid("entry"), text="echo: after the restart", timeout=WAIT)
    await wait_entries_match_store(browser, daemon, session)
    assert all(count == 1 for count in daemon.executions().values())


async def test_an_input_typed_while_the_bridge_is_down_goes_out_once_it_is_back(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await send(browser, "before")
    await browser.wait_for(tid("entry"), text="echo: before", timeout=WAIT)
    daemon.kill()
    await browser.wait_for(tid("presence", presence="online"), state="detached", timeout=WAIT)
    await send(browser, "typed offline")
    item = f"{tid('outbox-item')}:has-text('typed offline')"
    await browser.wait_for(item, state="attached", timeout=WAIT)
    state = await browser.attr(item, "data-state")
    assert state in ("pending", "published"), state  # not confirmed: nobody could ack it
    await shoot(browser, "typed-offline")
    await daemon.start()
    await browser.wait_for(tid("entry"), text="echo: typed offline", timeout=60)
    await browser.wait_for(
        f"{tid('outbox-item', state='confirmed')}:has-text('typed offline')",
        state="attached",
        timeout=WAIT,
    )
    await wait_entries_match_store(browser, daemon, session)
    assert sorted(daemon.executions().values()) == [1, 1]  # each input reached the agent once
