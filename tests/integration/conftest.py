"""Fixtures for the daemon's integration tests: a real relay, the daemon, paired phones."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProcess, kill_hosts_under
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay


@pytest.fixture(autouse=True)
def no_host_left_behind(tmp_path: Path) -> Iterator[None]:
    """Session hosts outlive a killed daemon by design; a test leaves none running."""
    yield
    kill_hosts_under(tmp_path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
async def daemon(
    relay: LoopbackRelay, tmp_path: Path, workspace: Path
) -> AsyncIterator[DaemonProcess]:
    async with DaemonProcess(tmp_path / "home", [relay.url], workspace) as running:
        yield running
    running.kill()


async def pair_phone(daemon: DaemonProcess, relay_url: str, label: str = "Pixel") -> PhoneSimulator:
    """A phone paired through the QR window, online, with the first heartbeat in."""
    opened = await daemon.call("pair.open", duration=600)
    phone = PhoneSimulator(relays=[relay_url], label=label)
    ack = await phone.pair(opened["url"])
    assert ack.message.ok, ack.message
    await phone.wait_for("sessions")
    return phone


@pytest.fixture
async def phone(daemon: DaemonProcess, relay: LoopbackRelay) -> AsyncIterator[PhoneSimulator]:
    paired = await pair_phone(daemon, relay.url)
    try:
        yield paired
    finally:
        await paired.close()
