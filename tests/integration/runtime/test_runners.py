"""RunnerManager: starting runners, the exactly-once inbox hand-off, crash reconciliation, close."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.agents.base import SessionSpec
from bridge.engine.inputs import AgentFailed, AgentReady
from store.db import BridgeDatabase
from tests.runtime.support import session_record
from tests.runtime.test_runners import CwdCase, make_rig


async def test_start_builds_the_spec_from_the_record(db: BridgeDatabase, tmp_path: Path) -> None:
    rig = make_rig(db, tmp_path, env={"ANTHROPIC_API_KEY": "k-1"})
    record = session_record(
        "s-1",
        "proj/app",
        permission_mode="default",
        model="m-2",
        effort_level="high",
        provider_id=None,
        sdk_session_id="sdk-old",
    )
    await rig.started(record, create=True)
    resolved = (rig.root / "proj" / "app").resolve()
    assert resolved.is_dir()
    runner = rig.agents.runner("s-1")
    assert runner.calls == [
        (
            "start",
            SessionSpec(
                session_id="s-1",
                cwd=resolved,
                permission_mode="default",
                model="m-2",
                effort_level="high",
                provider_id=None,
                sdk_session_id="sdk-old",
                env={"ANTHROPIC_API_KEY": "k-1"},
            ),
            False,
        )
    ]
    # The runner reported no cwd: the engine hears the directory the session really runs in.
    assert rig.fed == [AgentReady("s-1", "sdk-s-1", "fake-model", str(resolved))]
    assert rig.manager.running == 1


CWD_CASES = [
    CwdCase("no-cwd-is-the-first-root", "", False, False, "."),
    CwdCase("relative-existing", "have", False, False, "have"),
    CwdCase("absolute-inside", "{root}/have", False, False, "have"),
    CwdCase("created", "new/one", True, False, "new/one"),
    CwdCase(
        "missing-not-created",
        "nope",
        False,
        False,
        None,
        "nope does not exist (ask to create it with createCwd)",
    ),
    CwdCase("outside", "/", False, False, None, "/ is outside the bridge's workspace roots"),
    CwdCase("resume-existing", "{root}/have", False, True, "have"),
    CwdCase("resume-vanished", "{root}/gone", False, True, None, "{root}/gone no longer exists"),
]


@pytest.mark.parametrize("case", CWD_CASES, ids=[c.id for c in CWD_CASES])
async def test_the_cwd_is_resolved_under_the_workspace_root(
    db: BridgeDatabase, tmp_path: Path, case: CwdCase
) -> None:
    rig = make_rig(db, tmp_path)
    (rig.root / "have").mkdir()
    root = str(rig.root)
    await rig.started(
        session_record("s-1", case.requested.format(root=root)),
        resume=case.resume,
        create=case.create,
    )
    if case.cwd is None:
        assert rig.fed == [AgentFailed("s-1", case.reason.format(root=root))]
        assert rig.agents.made == []
        return
    [(_, spec, resume)] = rig.agents.runner("s-1").calls
    assert spec.cwd == (rig.root / case.cwd).resolve()
    assert resume is case.resume
    assert spec.permission_mode == "plan"  # the default when the record has none
