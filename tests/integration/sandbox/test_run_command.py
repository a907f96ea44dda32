"""The editor's ``run_command`` runs in the session's sandbox: the same walls as the agent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.agents.workspace_tools import WorkspaceTools
from bridge.sandbox import DiskFacts, check_sandbox, plan_policy

pytestmark = pytest.mark.skipif(
    not check_sandbox(None, os.environ.get("PATH")).available, reason="bubblewrap cannot run here"
)


async def test_a_command_writes_in_the_workspace_only_and_sees_no_secret(tmp_path: Path) -> None:
    root, secrets = tmp_path / "ws", tmp_path / "keys"
    root.mkdir()
    secrets.mkdir()
    (secrets / "id").write_text("the-key")
    (tmp_path / "netrc").write_text("the-key")
    bwrap = check_sandbox(None, os.environ.get("PATH")).bwrap
    assert bwrap is not None
    policy = plan_policy(
        bwrap=bwrap,
        cwd=str(root),
        env={"HOME": str(tmp_path / "home")},
        home=str(tmp_path / "home"),
        hidden=(str(secrets), str(tmp_path / "netrc")),
        facts=DiskFacts(hidden_dirs=(str(secrets),), hidden_files=(str(tmp_path / "netrc"),)),
    )
    tools = WorkspaceTools(root, {"PATH": os.environ["PATH"]}, sandbox=policy)
    command = (
        f"echo in > inside.txt; echo out > {tmp_path}/outside.txt; cat {secrets}/id; "
        f"cat {tmp_path}/netrc && echo netrc-empty; "
        'echo t > "$TMPDIR/t" && echo tmp-ok; ls /proc | grep -c "^[0-9]"'
    )
    result = await tools.call("run_command", {"command": command})
    assert (root / "inside.txt").read_text() == "in\n"
    assert not (tmp_path / "outside.txt").exists()
    assert "the-key" not in result.text
    assert "tmp-ok" in result.text and "netrc-empty" in result.text
    killed = await tools.call("run_command", {"command": "kill -9 $$"})
    assert killed.text.startswith("killed by signal 9")
