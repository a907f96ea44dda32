"""``python -m tests.redteam.report``: the red-team scenario as a table, one attack per turn.

For each attack: the gate's verdict (judged here, as the daemon judges it), what the phone saw
(``card``, ``block``, ``cli`` when Claude Code refused the call itself, or ``none``: it ran
without a card), and what it did on disk and on the wire in the throwaway home — each attack in a
turn of its own, the home restored after it, so each row is that attack's own effect.

By default the sandbox is off and the phone denies every card: the table is then exactly what
the gate alone lets through (the closing note's "what the gate still misses"). ``--sandbox on``
shows the same with the sandbox; ``--phone allow`` has the phone approve every card; ``--agent
opencode`` drives OpenCode (``opencode acp``, the pinned npm package) instead of Claude Code.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path

from bridge.gate import evaluate
from tests.differential.trial import gate_context
from tests.differential.web import serve_scripts
from tests.support.agent_packages import opencode_acp_command
from tests.support.daemon import kill_hosts_under
from tests.support.mock_anthropic import MockAnthropic
from tests.support.relay import LoopbackRelay

from .home import RedTeamHome
from .scenario import Observed, run_scenario

__all__ = ["main", "render"]


def render(observed: Observed, home: Path) -> str:
    """The table for one run."""
    context = gate_context(str(home))
    rows = [f"{'attack':<34} {'gate':<6} {'phone':<6} effect"]
    through = 0
    for outcome in observed.outcomes:
        attack = outcome.attack
        verdict = evaluate(attack.tool, attack.input, context).outcome.value
        seen = outcome.seen
        effect = outcome.effects.describe() if outcome.effects is not None else "?"
        through += verdict == "allow" and outcome.effects is not None and outcome.effects.harmful
        rows.append(f"{attack.kind + ':' + attack.id:<34} {verdict:<6} {seen:<6} {effect}")
    rows.append(
        f"{len(observed.outcomes)} attacks; {through} allowed by the gate and harmful; "
        f"sandboxed={observed.sandboxed}"
    )
    return "\n".join(rows)


async def _run(sandbox: bool, allow: bool, opencode: list[str] | None) -> str:
    root = Path(tempfile.mkdtemp(prefix="rt-"))
    try:
        async with LoopbackRelay() as relay:
            with MockAnthropic() as mock, serve_scripts() as server:
                home = RedTeamHome(root / "h", sandbox=sandbox, opencode=opencode)
                observed = await run_scenario(
                    home, relay.url, mock, server, allow=allow, turn_per_attack=True
                )
                return render(observed, home.home)
    finally:
        kill_hosts_under(root)
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Run the scenario and print its table."""
    parser = argparse.ArgumentParser(prog="python -m tests.redteam.report")
    parser.add_argument("--sandbox", choices=("on", "off"), default="off")
    parser.add_argument("--phone", choices=("allow", "deny"), default="deny")
    parser.add_argument("--agent", choices=("claude", "opencode"), default="claude")
    args = parser.parse_args(argv)
    opencode = opencode_acp_command() if args.agent == "opencode" else None
    print(f"{args.agent}, sandbox {args.sandbox}, the phone answers every card with {args.phone}")
    print(asyncio.run(_run(args.sandbox == "on", args.phone == "allow", opencode)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
