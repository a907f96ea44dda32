"""ClaudeDriver against the fake CLI: lifecycle, turns, prompts, checks, options, exits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.agents.claude import ClaudeDriver
from bridge.host.driver import DriverError
from bridge.host.events import (
    Failed,
)
from tests.host.fakes import FakeServices

from .conftest import FakeCli, Session, make_spec

# -- start -----------------------------------------------------------------------------------------


async def test_a_missing_cwd_fails_the_start(start_session: Any, tmp_path: Path) -> None:
    session: Session = await start_session(cwd=str(tmp_path / "missing"), no_cwd=True)
    [failed] = session.services.of(Failed)
    assert "does not exist" in failed.reason
    assert await session.run == failed.reason
    with pytest.raises(DriverError, match="not running"):
        session.driver.send_input("u", "x")


# -- turns ---------------------------------------------------------------------------------------


# -- permission prompts ------------------------------------------------------------------------


# -- pre-tool checks -----------------------------------------------------------------------------


# -- options ---------------------------------------------------------------------------------------


# -- the end -------------------------------------------------------------------------------------


async def test_close_before_run(fake_cli: FakeCli, tmp_path: Path) -> None:
    driver = ClaudeDriver(make_spec(fake_cli, tmp_path), FakeServices())
    await driver.close()
    assert await driver.run() is None
    assert fake_cli.log() == []
