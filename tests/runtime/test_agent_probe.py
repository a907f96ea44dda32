"""The fake ACP agent the start-up check runs against (its runs: tests/integration/runtime)."""

from __future__ import annotations

import sys

from tests.support.fake_acp_agent import fake_agent_command


def test_the_fake_agent_runs_with_this_python() -> None:
    assert fake_agent_command()[0] == sys.executable
