"""What the page shows as sessions and machines come and go: withdrawn cards, a machine that
stops cleanly, sessions closed on the machine or from the page."""

from __future__ import annotations

from tests.e2e.web.conftest import Shoot
from tests.e2e.web.steps import WAIT, base_url, create_session, pair, send, tid
from tests.support.browser import Browser, BrowserError
from tests.support.daemon import DaemonProcess


async def test_an_interrupt_withdraws_the_open_card(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    await create_session(browser, bridge)
    await send(browser, 'ask Bash {"command": "make deploy"}')
    await browser.wait_for(tid("card-permission"), timeout=WAIT)
    await browser.click(tid("interrupt"))
    await browser.wait_for(tid("card-permission"), state="detached", timeout=WAIT)
    await shoot(browser, "card-withdrawn")
    # The agent hears the interrupt as the answer to its wait; the call did not run.
    await browser.wait_for(tid("entry"), text="denied Bash: Interrupted", timeout=WAIT)
    assert "allowed Bash" not in "\n".join(await browser.texts(tid("entry")))
    assert await browser.count(tid("card-allow")) == 0


async def test_a_clean_stop_shows_the_machine_offline(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    item = tid("bridge-item", bridge_id=bridge)
    assert await daemon.stop() == 0  # SIGTERM: the last heartbeat says machineOffline
    try:
        await browser.wait_for(f"{item} {tid('presence', presence='offline')}", timeout=WAIT)
    except BrowserError:
        shown = await browser.attr(f"{item} {tid('presence')}", "data-presence")
        raise AssertionError(f"a machine that said it went offline shows as {shown!r}") from None
    await shoot(browser, "machine-offline")
    await daemon.start()
    await browser.wait_for(f"{item} {tid('presence', presence='online')}", timeout=60)


async def test_a_session_closed_on_the_machine_leaves_the_list(
    daemon: DaemonProcess, browser: Browser
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await browser.goto(base_url(daemon))
    row = tid("session-item", session_id=session)
    await browser.wait_for(row, timeout=WAIT)
    await daemon.call("sessions.close", session_id=session)
    await browser.wait_for(row, state="detached", timeout=WAIT)


async def test_a_session_closed_from_the_page_stops_on_the_machine(
    daemon: DaemonProcess, browser: Browser
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await browser.accept_dialogs()  # "Close … ? Its agent stops." → OK
    await browser.click("button", text="Close")
    await browser.wait_for(tid("session-item", session_id=session), state="detached", timeout=WAIT)
    listed = [s["sessionId"] for s in await daemon.call("sessions.list")]
    assert session not in listed
