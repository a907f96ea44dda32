"""The real Claude Code CLI answers a turn typed in CodeDeck Web (a local mock API, no internet)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.e2e.web.conftest import Shoot, need_browser, web_daemon
from tests.e2e.web.steps import WAIT, create_session, pair, send, tid, wait_entries_match_store
from tests.support.browser import Browser
from tests.support.daemon import DaemonProcess
from tests.support.mock_anthropic import MockAnthropic

CLAUDE_WAIT = 90.0
"""The CLI's first start in a fresh config dir takes seconds on a shared machine."""


@pytest.fixture(scope="module")
def mock_api() -> Iterator[MockAnthropic]:
    with MockAnthropic() as mock:
        yield mock


@pytest.fixture
async def claude_daemon(
    tmp_path: Path, workspace: Path, mock_api: MockAnthropic
) -> AsyncIterator[DaemonProcess]:
    need_browser()
    env = {**mock_api.cli_env(tmp_path / "claude-config"), "CODEDECK_AGENT": "claude"}
    async with web_daemon(tmp_path, workspace, env) as running:
        yield running
    running.kill()


async def test_claude_code_answers_a_turn_typed_in_the_browser(
    claude_daemon: DaemonProcess, browser: Browser, shoot: Shoot, mock_api: MockAnthropic
) -> None:
    bridge = await pair(browser, claude_daemon)
    session = await create_session(browser, bridge)
    await send(browser, "[[think: weighing it]] [[reply: **hello** from claude in the browser]]")
    # The user's line shows the asterisks; only the rendered reply reads "hello from claude".
    await browser.wait_for(
        tid("entry"), text="hello from claude in the browser", timeout=CLAUDE_WAIT
    )
    await browser.wait_for(tid("outbox-item", state="confirmed"), state="attached", timeout=WAIT)
    # Markdown is rendered (bold), as text nodes: the asterisks are gone, the words are there.
    texts = await browser.texts(tid("entry", entry_type="text"))
    reply = [t for t in texts if "hello from claude in the browser" in t]
    assert reply and "**" not in reply[-1], texts
    assert await browser.count(f"{tid('entry', entry_type='text')} strong", text="hello") == 1
    await browser.wait_for(tid("entry", entry_type="thinking"), state="attached", timeout=WAIT)
    assert mock_api.message_requests(), "the CLI never asked the mock API"
    await wait_entries_match_store(browser, claude_daemon, session, timeout=CLAUDE_WAIT)
    await shoot(browser, "claude-turn")
    logs = await browser.logs()
    assert not logs.errors, logs.render()
