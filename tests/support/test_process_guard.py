"""The fast tier's guard: every way of starting a program is refused while a fast test runs."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Callable

import pytest

from tests.support.process_guard import ProcessInUnitTier, take_attempts


async def _asyncio_subprocess() -> None:
    await asyncio.create_subprocess_exec("true")


STARTS: dict[str, Callable[[], object]] = {
    "subprocess ['true']": lambda: subprocess.run(["true"], check=False),
    "subprocess 'true'": lambda: subprocess.Popen("true", shell=True),
    "subprocess ('true',)": lambda: asyncio.run(_asyncio_subprocess()),
    "os.fork": os.fork,
    "os.posix_spawn '/bin/true'": lambda: os.posix_spawn("/bin/true", ["true"], {}),
}


@pytest.mark.parametrize("what", list(STARTS))
def test_a_start_is_refused_and_recorded_against_the_test(
    what: str, request: pytest.FixtureRequest
) -> None:
    with pytest.raises(ProcessInUnitTier) as refused:
        STARTS[what]()
    assert str(refused.value).startswith(f"{request.node.nodeid} starts a process (")
    assert "move the test into tests/integration/" in str(refused.value)
    # Taken here, so this test passes; left, they fail the test even though it caught the error.
    attempts = take_attempts()
    assert attempts == [what]
