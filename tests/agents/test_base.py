"""The guards every runner shares: start once, for its own session; work only while live."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.agents.base import LIVE_PHASES, Phase, RunnerError, SessionSpec, check_live, check_start

SPEC = SessionSpec("s-1", Path("/nowhere"))

START_CASES = [
    (Phase.NEW, "s-1", None),
    (Phase.NEW, "s-2", "the session spec is for another session"),
    (Phase.STARTING, "s-1", "the agent was already started"),
    (Phase.READY, "s-1", "the agent was already started"),
    (Phase.RESTARTING, "s-1", "the agent was already started"),
    (Phase.FAILED, "s-1", "the agent was already started"),
    (Phase.ENDED, "s-1", "the agent was already started"),
    (Phase.CLOSED, "s-1", "the agent is closed"),
    (Phase.CLOSED, "s-2", "the agent is closed"),  # the phase is checked first
]


@pytest.mark.parametrize(
    ("phase", "session_id", "error"), START_CASES, ids=[f"{c[0].value}-{c[1]}" for c in START_CASES]
)
def test_check_start(phase: Phase, session_id: str, error: str | None) -> None:
    if error is None:
        check_start("the agent", phase, session_id, SPEC)
        return
    with pytest.raises(RunnerError) as raised:
        check_start("the agent", phase, session_id, SPEC)
    assert str(raised.value) == error


LIVE_CASES = [
    (Phase.NEW, "the agent has not been started"),
    (Phase.STARTING, None),
    (Phase.READY, None),
    (Phase.RESTARTING, None),
    (Phase.FAILED, "the agent failed to start"),
    (Phase.ENDED, "the agent has ended"),
    (Phase.CLOSED, "the agent is closed"),
]


@pytest.mark.parametrize(("phase", "error"), LIVE_CASES, ids=[c[0].value for c in LIVE_CASES])
def test_check_live(phase: Phase, error: str | None) -> None:
    assert (phase in LIVE_PHASES) is (error is None)
    if error is None:
        check_live("the agent", phase)
        return
    with pytest.raises(RunnerError) as raised:
        check_live("the agent", phase)
    assert str(raised.value) == error


def test_every_phase_has_a_case() -> None:
    assert {c[0] for c in LIVE_CASES} == set(Phase)
