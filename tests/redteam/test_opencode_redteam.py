"""The red-team scenario through OpenCode (``opencode acp``): the sandbox holds for an ACP agent
too, with the phone allowing every card.

Fewer attacks than through Claude Code (one or more of each class, and the file tools on the
secrets), one turn each: OpenCode ends its turn at the first refused call, so a turn per attack
is what lets every attack be made. OpenCode reads files without asking for a permission the
bridge could see, which makes the hidden secrets the only thing between it and ``~/.ssh``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.differential.web import ScriptServer
from tests.support.agent_packages import AgentUnavailable, opencode_acp_command
from tests.support.mock_anthropic import MockAnthropic
from tests.support.relay import LoopbackRelay

from .home import RedTeamHome
from .scenario import escapes, run_scenario

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


async def test_the_sandbox_holds_for_opencode_when_the_phone_allows_every_card(
    relay: LoopbackRelay, mock_api: MockAnthropic, script_server: ScriptServer, short_root: Path
) -> None:
    try:
        command = opencode_acp_command()
    except AgentUnavailable as missing:
        pytest.skip(str(missing))
    home = RedTeamHome(short_root / "h", sandbox=True, opencode=command)
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
