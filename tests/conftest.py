"""Shared fixtures (real relays on 127.0.0.1, started per test and always stopped) and the tiers.

Resources only (style guide: builders over fixtures); event builders live with the tests.

A test's tier is its directory: everything under ``tests/integration/`` is marked
``integration`` (real relays, real daemon processes, external tools), everything under
``tests/e2e/`` is marked ``e2e`` (the real Claude Code CLI against a local mock API). The security
tiers join them: ``tests/differential/`` (shell lines run for real in a bubblewrap jail) is
``integration``, ``tests/redteam/`` (attacks through the real CLI) is ``e2e``. ``make unit``
deselects both marks. A test elsewhere that asks for a real relay, or carries one of those marks by
hand, stops the collection, and one that starts a process (an agent, the CLI, git, bwrap, a fresh
interpreter) fails (``tests/support/process_guard.py``): the fast tier stays fast only if nobody
can slip a slow test into it.

Property tests (hypothesis) are derandomized: every run tries the same examples, so a run is red
because of the change under test, never because a random draw found an old corner on an
unrelated commit. ``HYPOTHESIS_EXPLORE=1`` draws new examples (run it when working on a parser,
the gate or a codec, and turn what it finds into a fixed case).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.support import daemon as daemon_support
from tests.support import process_guard
from tests.support.relay import LoopbackRelay

settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("HYPOTHESIS_EXPLORE") else "fixed")

RelayFactory = Callable[..., Awaitable[LoopbackRelay]]
DAEMON_LOG_LINES = 80

TESTS = Path(__file__).resolve().parent
TIERS = {
    "integration": pytest.mark.integration,
    "e2e": pytest.mark.e2e,
    "differential": pytest.mark.integration,
    "redteam": pytest.mark.e2e,
}
MARKS = ("integration", "e2e")
REAL_RELAY_FIXTURES = frozenset({"relay", "relay_factory"})


def tier_mark(item: pytest.Item) -> pytest.MarkDecorator | None:
    """The mark of the tier a test's directory puts it in; None for the fast tier."""
    parts = item.path.resolve().relative_to(TESTS).parts
    return TIERS.get(parts[0]) if len(parts) > 1 else None


def pytest_configure(config: pytest.Config) -> None:
    process_guard.install()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the tier of its directory; refuse slow tests outside those."""
    misplaced: list[str] = []
    for item in items:
        mark = tier_mark(item)
        if mark is not None:
            item.add_marker(mark)
            continue
        hand_marked = [name for name in MARKS if item.get_closest_marker(name) is not None]
        relays = sorted(REAL_RELAY_FIXTURES & set(getattr(item, "fixturenames", ())))
        if hand_marked or relays:
            why = f"marked {', '.join(hand_marked)}" if hand_marked else f"uses {relays[0]}"
            misplaced.append(f"{item.nodeid} ({why})")
    if misplaced:
        raise pytest.UsageError(
            "tests outside tests/integration/ and tests/e2e/ that need a real relay or carry "
            "a tier mark; move them into the tier's directory:\n  " + "\n  ".join(misplaced)
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """A fast-tier test may start no process, from its setup to its teardown."""
    if tier_mark(item) is not None:
        yield
        return
    process_guard.arm(item.nodeid)
    try:
        yield
    finally:
        process_guard.disarm()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test's report ends with the last lines of each daemon it started.

    A failure in CI is seen once, on a machine that is gone: what the daemon logged (a relay that
    dropped, a host that stalled) is the only trace of why a wait timed out. A fast-tier test that
    tried to start a process fails even where it caught the refusal and went on.
    """
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    refused = process_guard.take_attempts()
    if refused and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} starts a process ({'; '.join(refused)}): the unit tier stays in "
            "this interpreter; move the test into tests/integration/ (the same path below it)"
        )
    if report.failed:
        for started in daemon_support.started():
            title = f"daemon log {started.home} (last {DAEMON_LOG_LINES} lines)"
            report.sections.append((title, started.log_tail(DAEMON_LOG_LINES)))


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """Forget the daemons the finished test started."""
    daemon_support.forget_started()


@pytest.fixture
async def relay() -> AsyncIterator[LoopbackRelay]:
    """A running rust-nostr LocalRelay (memory database, raised rate limits, no policy)."""
    async with LoopbackRelay() as running:
        yield running


@pytest.fixture
async def relay_factory() -> AsyncIterator[RelayFactory]:
    """``await relay_factory(**LoopbackRelay options)`` → a started relay, stopped at teardown."""
    started: list[LoopbackRelay] = []

    async def make(**options: Any) -> LoopbackRelay:
        running = LoopbackRelay(**options)
        started.append(running)
        await running.start()
        return running

    try:
        yield make
    finally:
        for running in reversed(started):
            await running.stop()
