"""Fixtures for the Claude Code driver tests: one mock API per module, a harness per session.

The harness runs a :class:`~bridge.agents.claude.ClaudeDriver` on the real bundled CLI, pointed at
the module's :class:`~tests.support.mock_anthropic.MockAnthropic` with a private config dir and
cwd under ``tmp_path``, with a :class:`~tests.host.fakes.FakeServices` as its host: tests read
what the driver emitted there and answer its permission asks and tool checks by hand.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.claude import ClaudeDriver
from bridge.host.driver import DriverSpec
from bridge.host.events import Entry, Failed, HostEvent, Ready
from tests.host.fakes import WAIT, FakeServices
from tests.support.mock_anthropic import MockAnthropic

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def mock_api() -> Iterator[MockAnthropic]:
    with MockAnthropic() as mock:
        yield mock


def is_stream_end(event: HostEvent) -> bool:
    return isinstance(event, Entry) and bool((event.entry.get("metadata") or {}).get("stream_end"))


@dataclass
class Harness:
    """One driver, its host's services and its running ``run()``."""

    driver: ClaudeDriver
    spec: DriverSpec
    services: FakeServices
    config_dir: Path
    run: asyncio.Task[str | None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cwd(self) -> Path:
        return Path(self.spec.cwd)

    @property
    def events(self) -> list[HostEvent]:
        return self.services.events

    def mark(self) -> int:
        return len(self.services.events)

    def entries(self, since: int = 0) -> list[dict[str, Any]]:
        return [dict(e.entry) for e in self.events[since:] if isinstance(e, Entry)]

    async def wait_for(
        self, predicate: Callable[[HostEvent], bool], *, since: int = 0, timeout: float = WAIT
    ) -> HostEvent:
        """The first event from index `since` on that satisfies `predicate` (waits for it)."""
        return await self.services.wait_for(  # type: ignore[no-any-return]
            lambda: next((e for e in self.events[since:] if predicate(e)), None), timeout
        )

    async def turn_end(self, since: int, timeout: float = WAIT) -> HostEvent:
        return await self.wait_for(is_stream_end, since=since, timeout=timeout)

    async def turn(self, text: str, *, uid: str | None = None) -> list[dict[str, Any]]:
        """Send `text` and wait for the end of its turn (``stream_end``): the turn's entries."""
        mark = self.mark()
        self.driver.send_input(uid or str(uuid.uuid4()), text)
        await self.turn_end(mark)
        return self.entries(mark)


def make_spec(
    mock_api: MockAnthropic,
    root: Path,
    *,
    mode: str = "default",
    model: str | None = None,
    effort: str | None = None,
    sdk_session_id: str | None = None,
    resume: bool = False,
    check_tools: bool = False,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> DriverSpec:
    if cwd is None:
        cwd = root / "cwd"
        cwd.mkdir(parents=True, exist_ok=True)
    base = {**os.environ, **mock_api.cli_env(root / "config")}
    return DriverSpec(
        session_id=str(uuid.uuid4()),
        cwd=str(cwd),
        permission_mode=mode,
        model=model,
        effort_level=effort,
        sdk_session_id=sdk_session_id,
        resume=resume,
        env=env if env is not None else base,
        options={"check_tools": check_tools},
    )


async def start(spec: DriverSpec, services: FakeServices, config_dir: Path) -> Harness:
    """A driver running `spec`, once it emitted ``Ready`` or ``Failed``."""
    driver = ClaudeDriver(spec, services)
    harness = Harness(driver, spec, services, config_dir)
    run = harness.run = asyncio.ensure_future(driver.run())
    await services.wait_for(lambda: services.of(Ready) or services.of(Failed) or run.done())
    return harness


@pytest.fixture
async def session_factory(
    mock_api: MockAnthropic, tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    """``await session_factory(mode=..., ...)`` → a started, ready :class:`Harness`."""
    harnesses: list[Harness] = []

    async def make(*, services: FakeServices | None = None, **kwargs: Any) -> Harness:
        root = tmp_path / f"s{len(harnesses)}"
        spec = make_spec(mock_api, root, **kwargs)
        harness = await start(spec, services or FakeServices(), root / "config")
        harnesses.append(harness)
        assert harness.services.of(Ready), harness.services.events
        return harness

    try:
        yield make
    finally:
        for harness in harnesses:
            await harness.driver.close()
            if harness.run is not None:
                await asyncio.wait_for(harness.run, WAIT)
