"""A session driven from CodeDeck Web: create, type, watch it stream, answer cards (real Chromium).

The scripted agent stands in for Claude Code (``lines N`` streams N entries, ``ask <Tool> {…}``
raises a card and answers with how it was answered), so each step's outcome is known exactly
and compared with the bridge's own store.
"""

from __future__ import annotations

import json

from bridge.agents.scripted import INTERRUPTED_TEXT
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


async def test_a_session_streams_and_the_input_is_confirmed(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await shoot(browser, "new-session")
    await send(browser, "lines 40")
    # The outbox item of the input goes pending → … → confirmed (the bridge's input-ack).
    await browser.wait_for(tid("outbox-item"), state="attached", timeout=WAIT)
    await browser.wait_for(tid("entry"), text="line 40 of 40", timeout=WAIT)
    await browser.wait_for(tid("outbox-item", state="confirmed"), state="attached", timeout=WAIT)
    assert await browser.count(tid("outbox-item", state="failed")) == 0
    shown = await wait_entries_match_store(browser, daemon, session)
    assert shown[0] == 1 and len(shown) >= 40
    # The user's own line is an entry too, as the bridge wrote it.
    await browser.wait_for(tid("entry"), text="lines 40", timeout=WAIT)
    await shoot(browser, "streamed")
    # Usable at phone width: nothing wider than the screen (no sideways scrolling) ...
    assert await browser.eval("document.documentElement.scrollWidth") <= PHONE_WIDTH
    # ... and on a desktop.
    await browser.set_viewport(1280, 800)
    await browser.wait_for(tid("composer-input"), timeout=WAIT)
    assert await browser.eval("document.documentElement.scrollWidth") <= 1280
    await shoot(browser, "desktop")
    assert daemon.executions() and list(daemon.executions().values()) == [1]
    logs = await browser.logs()
    assert not logs.errors, logs.render()


async def test_a_permission_card_is_answered_with_allow(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await send(browser, 'ask Bash {"command": "make build"}')
    await browser.wait_for(tid("card-permission"), timeout=WAIT)
    await shoot(browser, "permission-card")
    request = await browser.attr(tid("card-permission"), "data-request-id")
    assert request
    await browser.click(tid("card-allow"))
    await browser.wait_for(tid("entry"), text="allowed Bash", timeout=WAIT)
    await browser.wait_for(tid("card-permission"), state="detached", timeout=WAIT)
    texts = "\n".join(await browser.texts(tid("entry")))
    assert "denied Bash" not in texts
    await wait_entries_match_store(browser, daemon, session)


PHONE_WIDTH = 375
"""The browser fixture's viewport width (an iPhone's CSS pixels)."""

QUESTION = {
    "questions": [
        {
            "question": "Which colour should the button be?",
            "header": "Colour",
            "multiSelect": False,
            "options": [
                {"label": "Red", "description": "loud"},
                {"label": "Blue", "description": "calm"},
            ],
        }
    ]
}


async def test_a_question_card_is_answered_with_an_option(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await send(browser, f"ask AskUserQuestion {json.dumps(QUESTION)}")
    await browser.wait_for(tid("card-question"), timeout=WAIT)
    await browser.wait_for(tid("card-question"), text="Which colour", timeout=WAIT)
    assert await browser.count(tid("question-option")) == 2
    await shoot(browser, "question-card")
    await browser.click(tid("question-option"), text="Blue")
    if await browser.count(tid("question-submit")):
        await browser.click(tid("question-submit"))
    await browser.wait_for(tid("entry"), text="allowed AskUserQuestion", timeout=WAIT)
    await browser.wait_for(tid("card-question"), state="detached", timeout=WAIT)
    answered = [t for t in await browser.texts(tid("entry")) if "allowed AskUserQuestion" in t]
    assert "Blue" in answered[-1], answered
    shown = await wait_entries_match_store(browser, daemon, session)
    assert shown == sorted(set(await entry_seqs(browser)))


PLAN = {"plan": "# Plan\n\n1. Write the *failing* test\n2. Make it pass"}


async def test_a_plan_card_is_approved(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await send(browser, f"ask ExitPlanMode {json.dumps(PLAN)}")
    await browser.wait_for(tid("card-plan"), timeout=WAIT)
    await browser.wait_for(tid("entry"), text="Make it pass", timeout=WAIT)
    await shoot(browser, "plan-card")
    await browser.click(tid("plan-1"))
    await browser.wait_for(tid("entry"), text="allowed ExitPlanMode", timeout=WAIT)
    await browser.wait_for(tid("card-plan"), state="detached", timeout=WAIT)
    await browser.wait_for_function(
        "document.querySelector('[data-testid=mode-select]')?.value === 'acceptEdits'",
        timeout=WAIT,
    )
    await wait_entries_match_store(browser, daemon, session)


async def test_interrupt_ends_a_running_turn(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot
) -> None:
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await send(browser, "slow 60")
    await browser.wait_for(tid("outbox-item", state="confirmed"), state="attached", timeout=WAIT)
    await browser.wait_for(tid("interrupt"), timeout=WAIT)
    await browser.click(tid("interrupt"))
    await browser.wait_for(tid("entry"), text=INTERRUPTED_TEXT, timeout=WAIT)
    await shoot(browser, "interrupted")
    await wait_entries_match_store(browser, daemon, session)
