"""Several bridges in one client: the app hosted apart pairs two machines and drives each."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.web.conftest import Shoot, need_browser, web_daemon
from tests.e2e.web.steps import WAIT, create_session, send, tid, wait_entries_match_store
from tests.support.browser import Browser
from tests.support.daemon import DaemonProcess
from tests.support.phone_pairing import parse_pairing_url
from tests.support.web_pairing import open_pairing_link, web_link


@pytest.fixture
async def second(tmp_path: Path) -> AsyncIterator[DaemonProcess]:
    """Another machine's bridge, with a relay and a workspace of its own."""
    need_browser()
    workspace = tmp_path / "ws2"
    workspace.mkdir()
    async with web_daemon(tmp_path, workspace, name="home2", machine="otherbox") as running:
        yield running
    running.kill()


async def test_two_bridges_in_one_client(
    daemon: DaemonProcess,
    second: DaemonProcess,
    browser: Browser,
    shoot: Shoot,
    static_host: str,
) -> None:
    bridges = []
    for bridge_daemon in (daemon, second):
        opened = await bridge_daemon.call("pair.open", duration=600)
        bridge = parse_pairing_url(opened["url"]).bridge_pubkey
        link = web_link(static_host, opened["url"])
        await open_pairing_link(browser, link, bridge, "Two machines", timeout=WAIT)
        bridges.append(bridge)
    await browser.goto(static_host)
    for bridge in bridges:
        item = tid("bridge-item", bridge_id=bridge)
        await browser.wait_for(f"{item} {tid('presence', presence='online')}", timeout=WAIT)
    await shoot(browser, "two-bridges")
    # Each machine runs its own session from the same page.
    for bridge, bridge_daemon, word in zip(
        bridges, (daemon, second), ("first", "second"), strict=True
    ):
        await browser.goto(static_host)
        await browser.wait_for(tid("bridge-item", bridge_id=bridge), timeout=WAIT)
        session = await create_session(browser, bridge, within=bridge)
        await send(browser, f"hello {word}")
        await browser.wait_for(tid("entry"), text=f"echo: hello {word}", timeout=WAIT)
        await wait_entries_match_store(browser, bridge_daemon, session)
    assert len(await daemon.call("phones.list")) == 1
    assert len(await second.call("phones.list")) == 1
