"""Fixtures for the driver's unit tests: a fake Claude Code CLI (:mod:`.fake_cli`) per test.

:class:`FakeCli` is a ``cli_path`` (a shell wrapper that execs the fake with this interpreter), a
log of what the fake saw and did, and the environment a :class:`~bridge.host.driver.DriverSpec`
gives it (private ``HOME`` and ``CLAUDE_CONFIG_DIR``; nothing of the test's own environment).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.claude import ClaudeDriver
from bridge.host.driver import DriverSpec
from bridge.host.events import Entry, Failed, HostEvent, Ready
from tests.host.fakes import WAIT, FakeServices

FAKE = Path(__file__).with_name("fake_cli.py")


@dataclass
class FakeCli:
    """One fake CLI's files."""

    root: Path

    @property
    def path(self) -> Path:
        return self.root / "claude"

    @property
    def log_path(self) -> Path:
        return self.root / "cli.log"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root / "home"),
            "CLAUDE_CONFIG_DIR": str(self.config_dir),
            "FAKE_CLI_LOG": str(self.log_path),
            **extra,
        }

    def log(self, kind: str | None = None) -> list[dict[str, Any]]:
        """What the fake logged (of one kind)."""
        if not self.log_path.exists():
            return []
        records = [json.loads(line) for line in self.log_path.read_text().splitlines() if line]
        return [r for r in records if kind is None or r["kind"] == kind]

    def answers(self, subtype: str) -> list[dict[str, Any]]:
        """The answers the fake got to its `subtype` requests (the ``response`` objects)."""
        return [r["answer"] for r in self.log("answer") if r["subtype"] == subtype]

    def controls(self, subtype: str) -> list[dict[str, Any]]:
        """Our control requests of `subtype` the fake received."""
        return [r["request"] for r in self.log("control") if r["subtype"] == subtype]

    def transcript(self, session_id: str, lines: list[dict[str, Any]]) -> Path:
        """Write a transcript the fake (and the driver) will find for `session_id`."""
        path = self.config_dir / "projects" / "-fake" / f"{session_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path


@pytest.fixture
def fake_cli(tmp_path: Path) -> FakeCli:
    cli = FakeCli(tmp_path / "fake")
    (cli.root / "home").mkdir(parents=True)
    cli.path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    cli.path.chmod(0o755)
    return cli


def is_stream_end(event: HostEvent) -> bool:
    return isinstance(event, Entry) and bool((event.entry.get("metadata") or {}).get("stream_end"))


@dataclass
class Session:
    """A driver on the fake CLI, its services and its ``run()`` task."""

    driver: ClaudeDriver
    services: FakeServices
    cli: FakeCli
    spec: DriverSpec
    run: asyncio.Task[str | None]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def events(self) -> list[HostEvent]:
        return self.services.events

    def mark(self) -> int:
        return len(self.services.events)

    async def turn_end(self, since: int, timeout: float = WAIT) -> None:
        await self.services.wait_for(
            lambda: any(is_stream_end(e) for e in self.events[since:]), timeout
        )

    async def turn(self, text: str, uid: str | None = None) -> list[HostEvent]:
        mark = self.mark()
        self.driver.send_input(uid or str(uuid.uuid4()), text)
        await self.turn_end(mark)
        return self.events[mark:]


def make_spec(cli: FakeCli, cwd: Path, **overrides: Any) -> DriverSpec:
    options = {"cli_path": str(cli.path), **overrides.pop("options", {})}
    env = overrides.pop("env", None) or cli.env()
    fields: dict[str, Any] = {"session_id": str(uuid.uuid4()), "cwd": str(cwd), "env": env}
    fields.update(overrides)
    return DriverSpec(options=options, **fields)


@pytest.fixture
async def start_session(fake_cli: FakeCli, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await start_session(**spec_fields)`` → a :class:`Session` that emitted Ready/Failed."""
    sessions: list[Session] = []

    async def start(*, services: FakeServices | None = None, **overrides: Any) -> Session:
        cwd = Path(overrides.pop("cwd", tmp_path / "cwd"))
        if not overrides.pop("no_cwd", False) and cwd.parent == tmp_path:
            cwd.mkdir(exist_ok=True)
        spec = make_spec(fake_cli, cwd, **overrides)
        services = services or FakeServices(clock=lambda: 1_800_000_000.0)
        driver = ClaudeDriver(spec, services)
        run = asyncio.ensure_future(driver.run())
        session = Session(driver, services, fake_cli, spec, run)
        sessions.append(session)
        await services.wait_for(lambda: services.of(Ready) or services.of(Failed) or run.done())
        return session

    try:
        yield start
    finally:
        for session in sessions:
            await session.driver.close()
            await asyncio.wait_for(asyncio.shield(session.run), WAIT)
