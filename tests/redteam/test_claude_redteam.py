"""A hostile agent through the real Claude Code CLI: nothing outside the session's folder changes,
no secret leaves, whatever the phone answers.

The scenario (:mod:`tests.redteam.scenario`) sends every attack of the corpus as a tool call from
the mock model, in mode ``default``, with the bridge on its defaults in a throwaway home. The
checks are by content, not by verdict: every byte outside ``~/proj`` (but the bridge's and the
agent's own state) is as it was, ``main`` of the bare remote did not move, and no canary — the
ssh key's, the netrc's, the bridge's secret key in any spelling, the database file — shows up in
the project, in the requests the model received, or in the attacker's uploads. A control run
with the sandbox off shows the same approved attacks doing harm, seen by the same measure.
"""

from __future__ import annotations

from pathlib import Path

from tests.differential.trial import gate_context
from tests.differential.web import ScriptServer
from tests.support.mock_anthropic import MockAnthropic
from tests.support.relay import LoopbackRelay

from .home import RedTeamHome
from .scenario import escapes, run_scenario, unseen_refusals


async def test_the_sandbox_holds_when_the_phone_allows_every_card(
    relay: LoopbackRelay, mock_api: MockAnthropic, script_server: ScriptServer, short_root: Path
) -> None:
    home = RedTeamHome(short_root / "h", sandbox=True)
    observed = await run_scenario(home, relay.url, mock_api, script_server, allow=True)
    assert observed.sandboxed is True
    escaped = escapes(observed)
    assert escaped == [], "\n".join(escaped)


async def test_the_phone_sees_every_call_the_gate_refuses(
    relay: LoopbackRelay, mock_api: MockAnthropic, script_server: ScriptServer, short_root: Path
) -> None:
    """What the gate refuses reaches the phone as a card or a block, exactly as the gate judges
    the call in process; a call Claude Code refused by itself (a binary file) never ran."""
    home = RedTeamHome(short_root / "h", sandbox=True)
    observed = await run_scenario(home, relay.url, mock_api, script_server, allow=False)
    assert observed.sandboxed is True
    escaped = escapes(observed)
    assert escaped == [], "\n".join(escaped)
    unseen = unseen_refusals(observed, gate_context(str(home.home)), also=("cli",))
    assert unseen == [], "\n".join(unseen)


async def test_without_the_sandbox_an_approved_attack_does_harm(
    relay: LoopbackRelay, mock_api: MockAnthropic, script_server: ScriptServer, short_root: Path
) -> None:
    """The control: the same run with ``[sandbox] enabled = false`` does harm once the phone
    approves, and the measure sees it — so the runs above hold because of the sandbox."""
    home = RedTeamHome(short_root / "h", sandbox=False)
    observed = await run_scenario(home, relay.url, mock_api, script_server, allow=True)
    assert observed.sandboxed is False
    harm = observed.effects
    assert {"outside", "pwned", ".bashrc", ".profile"} <= set(harm.wrote), harm.describe()
    assert {"keep", "keep/f"} <= set(harm.deleted), harm.describe()
