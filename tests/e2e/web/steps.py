"""What a user does in CodeDeck Web, as steps over the ``data-testid`` contract.

The browser tests read as the user's path (open the pairing link, start a session, type, answer
a card) and select only by the test ids the UI promises (its ``data-testid`` contract), never by layout or wording, so a restyled screen keeps its tests.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from tests.support.browser import Browser, BrowserError
from tests.support.daemon import DaemonProcess
from tests.support.web_pairing import base_url, open_pairing_link, pairing_link, tid

__all__ = [
    "WAIT",
    "base_url",
    "create_session",
    "entry_seqs",
    "open_session",
    "pair",
    "pairing_link",
    "send",
    "tid",
    "wait_entries_match_store",
]

WAIT = 30.0
"""Seconds a step waits for the page (a relay round trip, a host start)."""


async def pair(browser: Browser, daemon: DaemonProcess, label: str = "Test browser") -> str:
    """Open a pairing link in the browser and see the bridge listed, online; its pubkey (hex)."""
    link, bridge = await pairing_link(daemon)
    await open_pairing_link(browser, link, bridge, label, timeout=WAIT)
    return bridge


async def _session_ids(browser: Browser) -> set[str]:
    return {s for s in await browser.attrs(tid("session-item"), "data-session-id") if s}


async def create_session(
    browser: Browser, bridge: str, cwd: str | None = None, *, within: str | None = None
) -> str:
    """New session (the agent's default folder, or `cwd`); opened; its id.

    With several bridges listed, `within` names the one whose form to use (its pubkey).
    """
    scope = f"{tid('bridge-item', bridge_id=within)} " if within else ""
    before = await _session_ids(browser)
    await browser.click(f"{scope}button{tid('new-session')}")
    if cwd is not None:
        await browser.fill(f"{scope}{tid('new-session-cwd')}", cwd)
    await browser.click(f"{scope}{tid('new-session-submit')}")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        route = str(await browser.eval("location.hash"))
        if f"#/b/{bridge}/s/" in route:
            session = route.rsplit("/s/", 1)[1]
            await browser.wait_for(tid("composer-input"), timeout=WAIT)
            return session
        fresh = await _session_ids(browser) - before
        if fresh:
            [session] = fresh
            await open_session(browser, bridge, session)
            return session
        if await browser.count(tid("session-failed")):
            raise BrowserError(f"the session failed: {await browser.text(tid('session-failed'))}")
        await asyncio.sleep(0.1)
    raise BrowserError(
        f"no new session within {WAIT} s (route {await browser.eval('location.hash')})"
    )


async def open_session(browser: Browser, bridge: str, session: str) -> None:
    """Show a session's transcript (by its route, as a bookmark or a push click would)."""
    await browser.eval(f"location.hash = {f'#/b/{bridge}/s/{session}'!r}")
    await browser.wait_for(tid("transcript"), state="attached", timeout=WAIT)
    await browser.wait_for(tid("composer-input"), timeout=WAIT)


async def send(browser: Browser, text: str) -> None:
    """Type `text` in the composer and send it."""
    await browser.fill(tid("composer-input"), text)
    await browser.click(tid("composer-send"))


async def entry_seqs(browser: Browser) -> list[int]:
    """The ``data-seq`` of every entry row on screen, in document order."""
    return [int(seq) for seq in await browser.attrs(tid("entry"), "data-seq") if seq is not None]


async def wait_entries_match_store(
    browser: Browser, daemon: DaemonProcess, session: str, *, timeout: float = WAIT
) -> list[int]:
    """Until the page shows exactly the store's seqs (1..seqHigh, each once, in order)."""
    deadline = time.monotonic() + timeout
    shown: list[int] = []
    stored: list[int] = []
    while time.monotonic() < deadline:
        stored = sorted(await asyncio.to_thread(daemon.transcript, session))
        shown = await entry_seqs(browser)
        if stored and shown == stored:
            return shown
        await asyncio.sleep(0.2)
    missing = sorted(set(stored) - set(shown))
    extra = sorted(set(shown) - set(stored))
    dupes = sorted(seq for seq, n in Counter(shown).items() if n > 1)
    raise BrowserError(
        f"the page shows {len(shown)} entries, the store has {len(stored)}: "
        f"missing {missing[:20]}, not in the store {extra[:20]}, twice {dupes[:20]}, "
        f"in order: {shown == sorted(shown)}"
    )
