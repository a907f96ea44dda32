"""The red-team scenario through OpenCode (``opencode acp``): the sandbox holds for an ACP agent
too, with the phone allowing every card; and with the phone denying every card, the phone saw a
card or a block for each call the gate refuses, reads and searches of the secrets included.

Fewer attacks than through Claude Code (one or more of each class, and the file tools on the
secrets), one turn each: OpenCode ends its turn at the first refused call, so a turn per attack
is what lets every attack be made. OpenCode asks about a read outside the project twice
(``external_directory`` naming the folder, then ``read`` naming nothing): the driver judges the
file the call names both times, so the deny list blocks it before the sandbox is needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.differential.trial import gate_context
from tests.differential.web import ScriptServer
from tests.support.agent_packages import AgentUnavailable, opencode_acp_command
from tests.support.mock_anthropic import MockAnthropic
from tests.support.relay import LoopbackRelay

from .home import RedTeamHome
from .scenario import escapes, run_scenario, unseen_refusals

ATTACK_IDS = frozenset(
    {
        "read-ssh_key",
        "read-netrc",
        "read-bridge-config",
        "edit-bashrc",
        "write-profile",
        "write-ssh-rc",
        "rm-recu",
        "chmod-recu",
        "arith",
        "ps4",
        "sed-e-command",
        "tar-checkpoint",
        "make-stdin",
        "push-force-with",
        "send-pack",
        "curl-O-bash",
        "curl-tclsh",
        "taskset",
        "script",
        "db-cat-redirect",
        "ssh-cp",
        "ssh-tar",
        "authorized-keys",
        "bashrc",
        "touch-outside",
        "link-home-rm",
        "umount-ssh",
        "remount-rw",
    }
)
"""At least one attack of each class; the file tools on the secrets and the dotfiles."""

UNASKED = frozenset({"dbracket", "declare"})
"""Lines OpenCode runs without asking anyone, whatever its permission rules: its bash tool asks
only about the simple commands its tree-sitter parse finds (``ShellTool.collect`` in the 1.18.33
binary: ``descendantsOfType("command")``, then no ask at all when there is none), and a line made
of assignments, ``[[ … ]]`` and ``declare`` has none, though bash runs the command hidden in the
variable's subscript. The gate never sees them; only the sandbox contains them."""


@pytest.fixture(scope="module")
def opencode() -> list[str]:
    try:
        return opencode_acp_command()
    except AgentUnavailable as missing:
        pytest.skip(str(missing))


async def test_the_sandbox_holds_for_opencode_when_the_phone_allows_every_card(
    relay: LoopbackRelay,
    mock_api: MockAnthropic,
    script_server: ScriptServer,
    short_root: Path,
    opencode: list[str],
) -> None:
    home = RedTeamHome(short_root / "h", sandbox=True, opencode=opencode)
    observed = await run_scenario(
        home,
        relay.url,
        mock_api,
        script_server,
        allow=True,
        turn_per_attack=True,
        only=ATTACK_IDS,
    )
    assert len(observed.outcomes) == len(ATTACK_IDS)
    assert observed.sandboxed is True
    escaped = escapes(observed)
    assert escaped == [], "\n".join(escaped)


async def test_the_phone_sees_every_opencode_call_the_gate_refuses(
    relay: LoopbackRelay,
    mock_api: MockAnthropic,
    script_server: ScriptServer,
    short_root: Path,
    opencode: list[str],
) -> None:
    """What the gate refuses reaches the phone as a card or a block, exactly as the gate judges
    the call in process; what it allows runs without a card. OpenCode asks about every call
    (``OPENCODE_PERMISSION``) but the :data:`UNASKED` lines: those run unseen, and the sandbox
    holds them (no escape)."""
    home = RedTeamHome(short_root / "h", sandbox=True, opencode=opencode)
    observed = await run_scenario(
        home,
        relay.url,
        mock_api,
        script_server,
        allow=False,
        turn_per_attack=True,
        only=ATTACK_IDS | UNASKED,
    )
    assert len(observed.outcomes) == len(ATTACK_IDS | UNASKED)
    assert observed.sandboxed is True
    escaped = escapes(observed)
    assert escaped == [], "\n".join(escaped)
    unseen = unseen_refusals(observed, gate_context(str(home.home)), unasked=UNASKED)
    assert unseen == [], "\n".join(unseen)
