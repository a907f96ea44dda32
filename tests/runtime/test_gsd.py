"""GSD state: installed/hasGit detection, a real-shaped .planning tree, odd directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.protocol import GsdAction, GsdExecution, GsdPhase, GsdState, GsdStateMessage, encode
from bridge.runtime.errands.gsd import MAX_FILE_BYTES, gsd_state

NOW = 1_800_000_000.0

ROADMAP = """# Roadmap: Demo

<details>
<summary>✅ v0.9 Prototype (shipped)</summary>

### Phase 1: Old prototype phase
**Goal**: gone
</details>

## 🚧 v1.0 MVP (in progress)

## Phases

- [x] **Phase 1: Foundation** - scaffolding
- [ ] **Phase 2: Auth** - login
- [ ] **Phase 2.1: Hotfix (INSERTED)** - urgent
- [ ] **Phase 3: Payments** - money
- [ ] **Phase 4: Launch** - ship it

## Phase Details

### Phase 1: Foundation
**Goal**: A skeleton
**Depends on**: Nothing (first phase)
**Plans**: 2 plans

### Phase 2: Auth
**Goal**: Users log in
**Depends on**: Phase 1
**Plans**: 3 plans

### Phase 2.1: Hotfix (INSERTED)
**Goal**: Fix it
**Depends on**: Phase 2
**Plans**: TBD

### Phase 3: Payments
**Goal**: Money
**Depends on**: Phase 2

### Phase 4: Launch
**Goal**: Ship
**Depends on**: Phase 3
"""

STATE = """---
gsd_state_version: 1.0
milestone: v1.0
---
# Project State

## Current Position

Phase: 2 of 4 (Auth)
Plan: 2 of 3 in current phase
Status: In progress
Progress: [████░░░░░░] 40%

## Accumulated Context

### Blockers/Concerns

- OAuth app approval pending
- None yet.

## Session Continuity

Last session: 2026-01-01 10:00
"""

PLAN = "<tasks>\n<task type='auto'>a</task>\n<task type='auto'>b</task>\n</tasks>\n"


def write(path: Path, text: str = "", *, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def project(root: Path) -> Path:
    """A GSD project midway through phase 2."""
    planning = root / ".planning"
    write(planning / "PROJECT.md", "# Demo\n")
    write(planning / "ROADMAP.md", ROADMAP)
    write(planning / "STATE.md", STATE)
    old = NOW - 3600
    p1 = planning / "phases" / "01-foundation"
    for name in ("01-01-PLAN.md", "01-01-SUMMARY.md", "01-02-PLAN.md", "01-02-SUMMARY.md"):
        write(p1 / name, PLAN if "PLAN" in name else "done", mtime=old)
    p2 = planning / "phases" / "02-auth"
    write(p2 / "02-CONTEXT.md", "ctx", mtime=old)
    write(p2 / "02-01-PLAN.md", PLAN, mtime=old)
    write(p2 / "02-01-SUMMARY.md", "done", mtime=old)
    write(p2 / "02-02-PLAN.md", PLAN + "<task>c</task>", mtime=old)
    write(p2 / "02-03-PLAN.md", PLAN, mtime=NOW - 60)  # touched a minute ago
    write(planning / "phases" / "03-payments" / "03-CONTEXT.md", "ctx", mtime=old)
    (planning / "phases" / "not-a-phase").mkdir()
    return root


def state(cwd: Path, **kwargs: object) -> GsdState:
    options: dict[str, object] = {"now": NOW, "config_dir": cwd / "no-config", "path_env": ""}
    options.update(kwargs)
    result = gsd_state(cwd, **options)  # type: ignore[arg-type]
    # whatever it reports must be a valid wire message
    encode(GsdStateMessage(sessionId="s", gsd=result))
    return result


# --- not a GSD project ---------------------------------------------------------------------------


def test_plain_folder_not_installed(tmp_path: Path) -> None:
    result = state(tmp_path)
    assert not result.available and not result.installed and not result.hasGit
    assert result.situation == "GSD is not set up"
    assert result.phases == [] and result.actions == [] and result.percent == 0
    assert result.execution is None and result.recommended is None


def test_git_in_a_parent_counts(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    assert state(inner).hasGit
    (tmp_path / "wt").mkdir()
    write(tmp_path / "wt" / ".git", "gitdir: elsewhere")  # a worktree's .git file
    assert state(tmp_path / "wt").hasGit


@pytest.mark.parametrize(
    ("layout", "prefix"),
    [
        (("get-shit-done/VERSION",), "/gsd-"),
        (("get-shit-done/bin/gsd-tools.cjs", "commands/gsd/help.md"), "/gsd:"),
    ],
    ids=["skills", "legacy-commands"],
)
def test_installed_globally(tmp_path: Path, layout: tuple[str, ...], prefix: str) -> None:
    config = tmp_path / "claude"
    for relative in layout:
        write(config / relative, "1.32.0")
    cwd = tmp_path / "proj"
    cwd.mkdir()
    result = state(cwd, config_dir=config)
    assert result.installed and not result.available
    assert result.situation == "No GSD project in this folder"
    assert f"{prefix}new-project" in result.summary


def test_installed_locally_in_a_parent_project(tmp_path: Path) -> None:
    write(tmp_path / ".claude" / "get-shit-done" / "VERSION", "1.32.0")
    cwd = tmp_path / "sub"
    cwd.mkdir()
    assert state(cwd).installed


def test_gsd_tools_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    write(bin_dir / "gsd-tools", "#!/bin/sh\n")
    (bin_dir / "gsd-tools").chmod(0o755)
    assert state(tmp_path, path_env=str(bin_dir)).installed
    assert not state(tmp_path, path_env=str(tmp_path / "empty")).installed


# --- a project ---------------------------------------------------------------------------------


def test_a_project_midway_through_phase_two(tmp_path: Path) -> None:
    result = state(project(tmp_path))
    assert result.available and not result.installed
    assert result.milestone == "v1.0 MVP"
    assert result.totalPhases == 5 and result.currentPhase == "2"
    assert [(p.number, p.name, p.diskStatus) for p in result.phases] == [
        ("1", "Foundation", "complete"),
        ("2", "Auth", "partial"),
        ("2.1", "Hotfix", "no_directory"),
        ("3", "Payments", "discussed"),
        ("4", "Launch", "no_directory"),
    ]
    phase1, phase2, hotfix, phase3, phase4 = result.phases
    assert phase1 == GsdPhase(
        number="1",
        name="Foundation",
        diskStatus="complete",
        plans=2,
        summaries=2,
        recentlyTouched=False,
        action=None,
        command=None,
        planCount=2,
        needsYou=None,
    )
    assert (phase2.plans, phase2.summaries, phase2.planCount) == (3, 1, 3)
    assert phase2.recentlyTouched and phase2.action == "execute"
    assert phase2.command == "/gsd-execute-phase 2"
    assert hotfix.action == "discuss" and hotfix.planCount is None
    assert phase3.action == "plan" and phase3.command == "/gsd-plan-phase 3"
    assert phase4.action is None  # only the first undiscussed phase is offered
    assert result.percent == 60  # 3 of 5 plans have summaries
    assert result.execution == GsdExecution(
        phase="2",
        plansTotal=3,
        plansDone=1,
        currentPlan="02-02",
        tasksDone=2,
        tasksTotal=7,
        lastTask=None,
    )
    assert result.blockers == ["OAuth app approval pending"]
    assert not result.paused and not result.verifyFailed
    assert result.situation == "Executing phase 2 (Auth): 1 of 3 plans done"
    assert (
        result.summary
        == "Milestone v1.0 MVP · 1 of 5 phases complete · 3/5 plans (60%) · 1 blocker"
    )
    assert result.actions[0] == GsdAction(
        id="execute-2",
        label="Execute phase 2: Auth",
        command="/gsd-execute-phase 2",
        recommended=True,
    )
    assert [a.id for a in result.actions] == ["execute-2", "discuss-2.1", "plan-3", "progress"]
    assert [a.recommended for a in result.actions] == [True, False, False, False]
    assert result.recommended == "/gsd-execute-phase 2"


def test_recently_touched_depends_on_now(tmp_path: Path) -> None:
    project(tmp_path)
    later = state(tmp_path, now=NOW + 3600)
    assert not any(p.recentlyTouched for p in later.phases)


def test_paused_work_and_failed_verification(tmp_path: Path) -> None:
    project(tmp_path)
    write(tmp_path / ".planning" / "phases" / "02-auth" / ".continue-here.md", "resume here")
    write(
        tmp_path / ".planning" / "phases" / "01-foundation" / "01-VERIFICATION.md",
        "---\nphase: 01\nstatus: gaps_found\n---\n",
    )
    result = state(tmp_path)
    assert result.paused and result.verifyFailed
    assert result.situation == "Paused in phase 2 (Auth)"
    assert result.actions[0].id == "resume-work" and result.actions[0].recommended
    assert result.recommended == "/gsd-resume-work"


def test_everything_done(tmp_path: Path) -> None:
    planning = tmp_path / ".planning"
    write(
        planning / "ROADMAP.md", "## v2.0: Second\n\n### Phase 1: Only\n- [x] **Phase 1: Only**\n"
    )
    for name in ("01-01-PLAN.md", "01-01-SUMMARY.md"):
        write(planning / "phases" / "01-only" / name, "x")
    result = state(tmp_path)
    assert result.milestone == "v2.0 Second"
    assert result.percent == 100 and result.situation == "All 1 phase complete"
    assert result.actions[0].id == "complete-milestone" and result.actions[0].recommended
    assert result.currentPhase is None and result.execution is None


def test_ticked_phases_without_directories_and_bullet_only_roadmaps(tmp_path: Path) -> None:
    write(
        tmp_path / ".planning" / "ROADMAP.md",
        "- [x] **Phase 1: Setup** - a\n- [ ] **Phase 2: Build** - b\n",
    )
    result = state(tmp_path)
    assert [(p.number, p.diskStatus, p.action) for p in result.phases] == [
        ("1", "complete", None),
        ("2", "no_directory", "discuss"),
    ]
    assert result.percent == 50 and result.situation == "Next: discuss phase 2 (Build)"


def test_project_without_a_roadmap_yet(tmp_path: Path) -> None:
    write(tmp_path / ".planning" / "PROJECT.md", "# Idea\n")
    write(tmp_path / ".planning" / "STATE.md", "Progress: [██░░] 20%\nStatus: Paused\n")
    result = state(tmp_path)
    assert result.available and result.totalPhases is None and result.phases == []
    assert result.situation == "Project set up; no roadmap phases yet"
    assert result.percent == 20 and result.paused
    assert [a.id for a in result.actions] == ["resume-work", "progress"]


# --- odd directories -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p / "missing",
        lambda p: (write(p / "file.txt"), p / "file.txt")[1],
        lambda p: (write(p / ".planning"), p)[1],
        lambda p: ((p / ".planning" / "ROADMAP.md").mkdir(parents=True), p)[1],
        lambda p: (write(p / ".planning" / "ROADMAP.md", "x" * (MAX_FILE_BYTES + 1)), p)[1],
    ],
    ids=["missing", "a-file", "planning-is-a-file", "roadmap-is-a-dir", "huge-roadmap"],
)
def test_odd_directories_never_raise(tmp_path: Path, make: object) -> None:
    cwd = make(tmp_path)  # type: ignore[operator]
    result = state(cwd)
    assert not result.available


def test_garbage_files_are_survivable(tmp_path: Path) -> None:
    planning = tmp_path / ".planning"
    planning.mkdir()
    (planning / "ROADMAP.md").write_bytes(b"\xff\xfe### Phase \x00: \xc3\n" * 100)
    (planning / "STATE.md").write_bytes(os.urandom(4096))
    (planning / "phases").mkdir()
    (planning / "phases" / "01-x").symlink_to(tmp_path / "nowhere")
    result = state(tmp_path)
    assert result.available


def test_unreadable_phase_directory(tmp_path: Path) -> None:
    project(tmp_path)
    locked = tmp_path / ".planning" / "phases" / "02-auth"
    locked.chmod(0)
    try:
        result = state(tmp_path)
    finally:
        locked.chmod(0o755)
    assert result.available


def test_state_position_matches_a_zero_padded_phase(tmp_path: Path) -> None:
    project(tmp_path)
    write(tmp_path / ".planning" / "STATE.md", "Phase: 03 of 4 (Payments)\nStatus: Planning\n")
    assert state(tmp_path).currentPhase == "3"
