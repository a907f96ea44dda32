"""Fixtures for the Claude Code runner tests: one mock API per module, a harness per session.

The harness runs a :class:`~bridge.agents.claude.ClaudeRunner` on the real bundled CLI, pointed at
the module's :class:`~tests.support.mock_anthropic.MockAnthropic` with a private config dir and
cwd under ``tmp_path``, and collects what the runner emits so tests can wait for an event.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bridge.agents.base import AgentEvent, SessionSpec
from bridge.agents.claude import ClaudeRunner, EnvHook
from bridge.engine.inputs import AgentEntry, AgentReady
from bridge.protocol import OutputEntry
from tests.support.mock_anthropic import MockAnthropic

E = TypeVar("E")

WAIT = 30.0  # generous: the machine has 2 shared cores; nothing here asserts on speed


@pytest.fixture(scope="module")
def mock_api() -> Iterator[MockAnthropic]:
    with MockAnthropic() as mock:
        yield mock


@dataclass
class Harness:
    """One runner plus everything it emitted, in order."""

    runner: ClaudeRunner
    spec: SessionSpec
    config_dir: Path
    events: list[AgentEvent] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def emit(self, event: AgentEvent) -> None:
        self.events.append(event)
        self.changed.set()

    @property
    def cwd(self) -> Path:
        return self.spec.cwd

    def position(self, event: AgentEvent) -> int:
        """The index of this very event (events are values: equal ones can repeat)."""
        return next(i for i, e in enumerate(self.events) if e is event)

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    def entries(self, since: int = 0) -> list[OutputEntry]:
        return [e.entry for e in self.events[since:] if isinstance(e, AgentEntry)]

    async def wait_for(
        self, predicate: Callable[[AgentEvent], bool], *, since: int = 0, timeout: float = WAIT
    ) -> AgentEvent:
        """The first event from index `since` on that satisfies `predicate` (waits for it)."""
        async with asyncio.timeout(timeout):
            while True:
                for event in self.events[since:]:
                    if predicate(event):
                        return event
                self.changed.clear()
                await self.changed.wait()

    async def wait_kind(self, kind: type[E], *, since: int = 0, timeout: float = WAIT) -> E:
        found = await self.wait_for(lambda e: isinstance(e, kind), since=since, timeout=timeout)
        assert isinstance(found, kind)
        return found

    async def turn(self, text: str, *, uid: str | None = None) -> list[OutputEntry]:
        """Send `text` and wait for the end of its turn (``stream_end``): the turn's entries."""
        mark = len(self.events)
        await self.runner.send_input(uid or str(uuid.uuid4()), text)
        await self.wait_for(lambda e: _is_stream_end(e), since=mark)
        return self.entries(mark)


def _is_stream_end(event: AgentEvent) -> bool:
    return isinstance(event, AgentEntry) and bool((event.entry.metadata or {}).get("stream_end"))


@pytest.fixture
async def session_factory(
    mock_api: MockAnthropic, tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    """``await session_factory(mode=..., env_hook=..., ...)`` → a started, ready :class:`Harness`."""
    harnesses: list[Harness] = []

    async def make(
        *,
        mode: str = "default",
        model: str | None = None,
        effort: str | None = None,
        env_hook: EnvHook | None = None,
        diff: bool = False,
        extra_env: dict[str, str] | None = None,
        name: str | None = None,
    ) -> Harness:
        name = name or f"s{len(harnesses)}"
        cwd = tmp_path / name / "cwd"
        cwd.mkdir(parents=True)
        config_dir = tmp_path / name / "config"
        base_env = {**os.environ, **mock_api.cli_env(config_dir), **(extra_env or {})}
        spec = SessionSpec(
            session_id=str(uuid.uuid4()),
            cwd=cwd,
            permission_mode=mode,
            model=model,
            effort_level=effort,
        )
        harness: Harness
        runner = ClaudeRunner(
            spec.session_id,
            lambda event: harness.emit(event),
            base_env=base_env,
            env_hook=env_hook,
            diff_allowed=lambda: diff,
        )
        harness = Harness(runner, spec, config_dir)
        harnesses.append(harness)
        await runner.start(spec, resume=False)
        await harness.wait_kind(AgentReady)
        return harness

    try:
        yield make
    finally:
        for harness in harnesses:
            await harness.runner.close()
