"""End to end: phone simulator → real relay → the daemon → the real Claude Code CLI → mock API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess, kill_hosts_under
from tests.support.mock_anthropic import MockAnthropic
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay


@pytest.fixture(scope="module")
def mock_api() -> Iterator[MockAnthropic]:
    with MockAnthropic() as mock:
        yield mock


@pytest.fixture(autouse=True)
def no_host_left_behind(tmp_path: Path) -> Iterator[None]:
    """Session hosts outlive a killed daemon by design; a test leaves none running."""
    yield
    kill_hosts_under(tmp_path)


@pytest.fixture
async def claude_daemon(
    relay: LoopbackRelay, tmp_path: Path, mock_api: MockAnthropic
) -> AsyncIterator[DaemonProcess]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # The agents run sandboxed: only the session's folder (and the agent's own state) is
    # writable. The card tests write outside it on purpose, to `outside`, given here.
    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir(mode=0o700)
    outside.mkdir()
    (home / "config.toml").write_text(f'[sandbox]\nwritable = ["{outside}"]\n')
    env = {**mock_api.cli_env(tmp_path / "claude-config"), "CODEDECK_AGENT": "claude"}
    async with DaemonProcess(home, [relay.url], workspace, env=env) as running:
        yield running
    running.kill()


@pytest.fixture
async def phone(
    claude_daemon: DaemonProcess, relay: LoopbackRelay
) -> AsyncIterator[PhoneSimulator]:
    paired = await pair_phone(claude_daemon, relay.url)
    try:
        yield paired
    finally:
        await paired.close()
