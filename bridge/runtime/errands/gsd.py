"""GSD state of a session's project, for ``gsd-request`` → ``gsd-state`` (PROTOCOL-v10-wire.md §4.5).

GSD is "Get Shit Done" (npm ``get-shit-done-cc``), a planning workflow for Claude Code: slash
commands (``/gsd-new-project``, ``/gsd-plan-phase 2``, ``/gsd-execute-phase 2``, …) that keep the
project's plan as Markdown under ``<project>/.planning/``:

- ``ROADMAP.md``: the phases, as ``### Phase 2: Name`` headings with ``**Depends on**:`` and
  ``**Plans**:`` lines, and ``- [x] **Phase 1: …**`` checkboxes once a phase is done; shipped
  milestones are folded into ``<details>`` blocks;
- ``STATE.md``: ``Phase: 2 of 5 (Name)``, ``Status: …``, a ``Blockers/Concerns`` list;
- ``phases/02-name/``: ``02-01-PLAN.md`` … (one per plan), ``02-01-SUMMARY.md`` once a plan is
  executed, ``02-CONTEXT.md`` / ``02-RESEARCH.md`` before planning, ``02-VERIFICATION.md`` with
  ``status: gaps_found`` when verification failed, ``.continue-here.md`` when work was paused.

This module reads those files with the rules of GSD's own ``gsd-tools`` (``roadmap analyze`` and
``init manager``): a phase's disk status is ``complete`` (every plan has a summary, or the roadmap
box is ticked), ``partial``, ``planned``, ``researched``, ``discussed``, ``empty`` or
``no_directory``; the next step per phase is execute (planned, dependencies done, or partial),
plan (discussed/researched) or discuss (the first phase with nothing on disk); progress is
summaries over plans. What cannot be read reliably is reported as unknown (``null``), never guessed:
``needsYou`` and ``lastTask`` are always null.

``installed`` is true when the GSD tooling is present for this session: a
``get-shit-done/`` install (``VERSION`` or ``bin/gsd-tools.cjs``) in the Claude config directory
(``$CLAUDE_CONFIG_DIR`` or ``~/.claude``) or in a ``.claude/`` of the project or a parent, or
``gsd-tools`` on ``PATH``. ``available`` is true when the project has a ``.planning/`` directory
with a ``ROADMAP.md``, ``STATE.md`` or ``PROJECT.md``; otherwise the state says so in
``situation``/``summary``. ``hasGit``: a ``.git`` in the directory or a parent.

Blocking file I/O: call :func:`gsd_state` through ``asyncio.to_thread``. It never raises: files
are read with a size cap, odd or unreadable directories give ``available: false``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from bridge.protocol import GsdAction, GsdExecution, GsdPhase, GsdState

__all__ = ["MAX_FILE_BYTES", "RECENT_SECONDS", "claude_config_dir", "gsd_state"]

MAX_FILE_BYTES: Final = 1024 * 1024
RECENT_SECONDS: Final = 300.0
"""A phase touched within five minutes is "recently touched" (gsd-tools' ``is_active``)."""
MAX_PHASES: Final = 500

_PHASE_HEADING: Final = re.compile(
    r"^#{2,4}\s*Phase\s+(\d+[A-Z]?(?:\.\d+)*)\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE
)
_PHASE_BULLET: Final = re.compile(
    r"^\s*-\s*\[[ xX]\]\s*\*\*Phase\s+(\d+[A-Z]?(?:\.\d+)*)\s*:\s*([^*]+)\*\*", re.MULTILINE
)
_DIR_TOKEN: Final = re.compile(r"^(?:[A-Z]{1,6}-)?(\d+[A-Z]?(?:\.\d+)*)(?:-|$)", re.IGNORECASE)
_DETAILS: Final = re.compile(r"<details>.*?</details>", re.IGNORECASE | re.DOTALL)
_MILESTONE_ACTIVE: Final = re.compile(r"🚧\s*\*\*v(\d+(?:\.\d+)+)\s+([^*]+)\*\*")
_MILESTONE_HEADING: Final = re.compile(r"^## .*?v(\d+(?:\.\d+)+)[:\s]+([^\n(]+)", re.MULTILINE)
_TASK: Final = re.compile(r"<task\b", re.IGNORECASE)


@dataclass(slots=True)
class _Phase:
    number: str
    name: str
    ticked: bool = False
    depends: list[str] = field(default_factory=list)
    plan_count: int | None = None
    disk_status: str = "no_directory"
    plans: list[str] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    recently_touched: bool = False
    verify_failed: bool = False
    paused: bool = False
    tasks_total: int | None = None
    tasks_done: int = 0
    action: str | None = None


def claude_config_dir() -> Path:
    """Where Claude Code (and a global GSD install) keeps its files."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else Path.home() / ".claude"


def _read(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def _listdir(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as entries:
            return sorted(entries, key=lambda e: e.name)[:5000]
    except (OSError, ValueError):
        return []


def _normalize_number(number: str) -> str:
    match = re.match(r"^(\d+)([A-Z]?)((?:\.\d+)*)", number, re.IGNORECASE)
    if match is None:
        return number.upper()
    return match[1].lstrip("0").rjust(2, "0") + match[2].upper() + match[3]


def _field(text: str, name: str) -> str | None:
    """A STATE.md field, ``**Name:** value`` or ``Name: value`` (as gsd-tools reads it)."""
    escaped = re.escape(name)
    match = re.search(rf"\*\*{escaped}:\*\*\s*(.+)", text, re.IGNORECASE) or re.search(
        rf"^{escaped}:\s*(.+)", text, re.IGNORECASE | re.MULTILINE
    )
    return match[1].strip() if match else None


def _find_install(cwd: Path, config_dir: Path, path_env: str | None) -> tuple[bool, str]:
    """Whether the GSD tooling is installed, and its slash-command prefix."""
    candidates = [config_dir] + [parent / ".claude" for parent in (cwd, *cwd.parents)]
    for base in candidates:
        tool = base / "get-shit-done"
        try:
            found = (tool / "VERSION").is_file() or (tool / "bin" / "gsd-tools.cjs").is_file()
            legacy = (base / "commands" / "gsd").is_dir()
        except OSError:
            continue
        if found:
            # Older installs ship commands/gsd/*.md (/gsd:name); newer ones skills (/gsd-name).
            return True, "/gsd:" if legacy else "/gsd-"
    if shutil.which("gsd-tools", path=path_env) is not None:
        return True, "/gsd-"
    return False, "/gsd-"


def _has_git(cwd: Path) -> bool:
    for directory in (cwd, *cwd.parents):
        try:
            if (directory / ".git").exists():
                return True
        except OSError:
            return False
    return False


def _parse_roadmap(text: str) -> tuple[list[_Phase], str | None]:
    milestone: str | None = None
    active = _MILESTONE_ACTIVE.search(text)
    current = _DETAILS.sub("", text)
    heading = _MILESTONE_HEADING.search(current)
    if active:
        milestone = f"v{active[1]} {active[2].strip()}"
    elif heading:
        milestone = f"v{heading[1]} {heading[2].strip()}"
    matches = list(_PHASE_HEADING.finditer(current))
    phases: list[_Phase] = []
    seen: set[str] = set()
    for index, match in enumerate(matches[:MAX_PHASES]):
        number = match[1]
        if number in seen:
            continue
        seen.add(number)
        end = matches[index + 1].start() if index + 1 < len(matches) else len(current)
        section = current[match.start() : end]
        phase = _Phase(
            number=number, name=re.sub(r"\(INSERTED\)", "", match[2], flags=re.I).strip()
        )
        depends = re.search(r"\*\*Depends on(?::\*\*|\*\*:)\s*([^\n]+)", section, re.IGNORECASE)
        if depends and not re.match(r"^\s*(none|nothing)", depends[1], re.IGNORECASE):
            phase.depends = re.findall(r"\d+[A-Z]?(?:\.\d+)*", depends[1])
        plans = re.search(r"\*\*Plans(?::\*\*|\*\*:)\s*(\d+)\s*plans?", section, re.IGNORECASE)
        phase.plan_count = int(plans[1]) if plans else None
        phases.append(phase)
    if not phases:
        for match in list(_PHASE_BULLET.finditer(current))[:MAX_PHASES]:
            if match[1] not in seen:
                seen.add(match[1])
                phases.append(_Phase(number=match[1], name=match[2].strip()))
    for phase in phases:
        box = re.search(
            rf"-\s*\[(x| )\]\s*.*Phase\s+{re.escape(phase.number)}[:\s]", current, re.IGNORECASE
        )
        phase.ticked = bool(box and box[1].lower() == "x")
    return phases, milestone


def _scan_phase(phase: _Phase, directory: Path, now: float) -> None:
    files = _listdir(directory)
    names = [e.name for e in files]
    phase.plans = [n for n in names if n.endswith("-PLAN.md") or n == "PLAN.md"]
    phase.summaries = [n for n in names if n.endswith("-SUMMARY.md") or n == "SUMMARY.md"]
    has_context = any(n.endswith("-CONTEXT.md") or n == "CONTEXT.md" for n in names)
    has_research = any(n.endswith("-RESEARCH.md") or n == "RESEARCH.md" for n in names)
    phase.paused = any(n.startswith(".continue-here") for n in names)
    plans, summaries = len(phase.plans), len(phase.summaries)
    if plans and summaries >= plans:
        phase.disk_status = "complete"
    elif summaries:
        phase.disk_status = "partial"
    elif plans:
        phase.disk_status = "planned"
    elif has_research:
        phase.disk_status = "researched"
    elif has_context:
        phase.disk_status = "discussed"
    else:
        phase.disk_status = "empty"
    if phase.ticked:
        phase.disk_status = "complete"
    newest = 0.0
    for entry in files:
        try:
            newest = max(newest, entry.stat().st_mtime)
        except OSError:
            continue
    phase.recently_touched = newest > 0 and now - newest < RECENT_SECONDS
    for name in names:
        if name.endswith("-VERIFICATION.md") or name == "VERIFICATION.md":
            text = _read(directory / name) or ""
            if re.search(r"^status:\s*gaps_found\b", text, re.MULTILINE):
                phase.verify_failed = True
    done = {n.removesuffix("SUMMARY.md") for n in phase.summaries}
    total = 0
    for plan in phase.plans:
        count = len(_TASK.findall(_read(directory / plan) or ""))
        total += count
        if plan.removesuffix("PLAN.md") in done:
            phase.tasks_done += count
    phase.tasks_total = total if total else None


def _recommend(phases: list[_Phase]) -> None:
    complete = {p.number for p in phases if p.disk_status == "complete"}
    next_to_discuss = True
    for phase in phases:
        if phase.disk_status == "complete" or re.match(r"^999(\.|$)", phase.number):
            continue
        if phase.disk_status == "partial" or (
            phase.disk_status == "planned" and all(d in complete for d in phase.depends)
        ):
            phase.action = "execute"
        elif phase.disk_status in ("discussed", "researched"):
            phase.action = "plan"
        elif phase.disk_status in ("empty", "no_directory") and next_to_discuss:
            phase.action = "discuss"
        if phase.disk_status in ("empty", "no_directory"):
            next_to_discuss = False


def _unavailable(installed: bool, has_git: bool, situation: str, summary: str) -> GsdState:
    return GsdState(
        installed=installed,
        available=False,
        hasGit=has_git,
        situation=situation,
        summary=summary,
        milestone=None,
        currentPhase=None,
        totalPhases=None,
        percent=0,
        phases=[],
        actions=[],
        recommended=None,
        paused=False,
        blockers=[],
        verifyFailed=False,
        execution=None,
    )


def gsd_state(
    cwd: str | os.PathLike[str],
    *,
    now: float | None = None,
    config_dir: Path | None = None,
    path_env: str | None = None,
) -> GsdState:
    """The GSD state of the project at `cwd` (see the module docstring). Never raises.

    Args:
        cwd: the session's working directory.
        now: unix time for "recently touched" (default: the clock).
        config_dir: the Claude config directory (default: :func:`claude_config_dir`).
        path_env: the ``PATH`` to search for ``gsd-tools`` (default: the process's).
    """
    try:
        return _gsd_state(
            Path(os.path.abspath(cwd)),
            time.time() if now is None else now,
            config_dir if config_dir is not None else claude_config_dir(),
            path_env,
        )
    except Exception as exc:  # a report must never take the daemon down
        return _unavailable(
            False, False, "GSD state unreadable", f"Could not read it ({type(exc).__name__})."
        )


def _gsd_state(cwd: Path, now: float, config_dir: Path, path_env: str | None) -> GsdState:
    installed, prefix = _find_install(cwd, config_dir, path_env)
    has_git = _has_git(cwd)
    planning = cwd / ".planning"
    roadmap_text = _read(planning / "ROADMAP.md")
    state_text = _read(planning / "STATE.md")
    if roadmap_text is None and state_text is None and _read(planning / "PROJECT.md") is None:
        if installed:
            return _unavailable(
                True,
                has_git,
                "No GSD project in this folder",
                f"GSD is installed. Run {prefix}new-project to plan this project "
                f"({prefix}map-codebase first for existing code).",
            )
        return _unavailable(
            False,
            has_git,
            "GSD is not set up",
            "No .planning folder here, and the Get Shit Done tooling (npx get-shit-done-cc) "
            "was not found.",
        )
    phases, milestone = _parse_roadmap(roadmap_text or "")
    state_text = state_text or ""
    if milestone is None and (found := re.search(r"^milestone:\s*(.+)$", state_text, re.M)):
        milestone = found[1].strip()
    directories: dict[str, Path] = {}
    for entry in _listdir(planning / "phases"):
        token = _DIR_TOKEN.match(entry.name)
        if token and entry.is_dir(follow_symlinks=False):
            directories.setdefault(_normalize_number(token[1]), Path(entry.path))
    for phase in phases:
        directory = directories.get(_normalize_number(phase.number))
        if directory is not None:
            _scan_phase(phase, directory, now)
        elif phase.ticked:
            phase.disk_status = "complete"
    _recommend(phases)
    by_number = {_normalize_number(p.number): p for p in phases}
    status = (_field(state_text, "Status") or "").lower()
    paused = (
        "paused" in status
        or "stopped" in status
        or _field(state_text, "Paused At") is not None
        or any(p.paused for p in phases)
    )
    blockers = _blockers(state_text)
    position = re.search(r"^Phase:\s*(\d+[A-Z]?(?:\.\d+)*)\b", state_text, re.M | re.I)
    current = by_number.get(_normalize_number(position[1])) if position else None
    executing = next((p for p in phases if p.disk_status == "partial"), None)
    if current is None:
        current = executing or next((p for p in phases if p.disk_status != "complete"), None)
    total_plans = sum(len(p.plans) for p in phases)
    done_plans = sum(min(len(p.summaries), len(p.plans)) for p in phases)
    complete = [p for p in phases if p.disk_status == "complete"]
    if total_plans:
        percent = min(100, round(done_plans / total_plans * 100))
    elif complete:
        percent = round(len(complete) / len(phases) * 100)
    elif (shown := re.search(r"(\d{1,3})%", _field(state_text, "Progress") or "")) is not None:
        percent = min(100, int(shown[1]))
    else:
        percent = 0
    actions = _actions(phases, prefix, paused)
    execution = None
    if executing is not None:
        remaining = [
            p
            for p in executing.plans
            if p.removesuffix("PLAN.md")
            not in {s.removesuffix("SUMMARY.md") for s in executing.summaries}
        ]
        execution = GsdExecution(
            phase=executing.number,
            plansTotal=len(executing.plans),
            plansDone=min(len(executing.summaries), len(executing.plans)),
            currentPlan=remaining[0].removesuffix("-PLAN.md") if remaining else None,
            tasksDone=executing.tasks_done,
            tasksTotal=executing.tasks_total,
            lastTask=None,
        )
    verify_failed = any(p.verify_failed for p in phases)
    situation = _situation(phases, current, executing, paused, verify_failed)
    summary_parts = [f"Milestone {milestone}" if milestone else "GSD project"]
    if phases:
        summary_parts.append(f"{len(complete)} of {len(phases)} phases complete")
    if total_plans:
        summary_parts.append(f"{done_plans}/{total_plans} plans ({percent}%)")
    if blockers:
        summary_parts.append(_plural(len(blockers), "blocker"))
    return GsdState(
        installed=installed,
        available=True,
        hasGit=has_git,
        situation=situation,
        summary=" · ".join(summary_parts),
        milestone=milestone,
        currentPhase=current.number if current is not None else None,
        totalPhases=len(phases) if phases else None,
        percent=percent,
        phases=[_wire_phase(p, prefix) for p in phases],
        actions=actions,
        recommended=actions[0].command if actions and actions[0].recommended else None,
        paused=paused,
        blockers=blockers,
        verifyFailed=verify_failed,
        execution=execution,
    )


def _blockers(state_text: str) -> list[str]:
    section = re.search(
        r"^#{2,3}\s*(?:Blockers|Blockers/Concerns|Concerns)\s*\n(.*?)(?=^#{2,3}\s|\Z)",
        state_text,
        re.MULTILINE | re.DOTALL | re.IGNORECASE,
    )
    if section is None:
        return []
    items = [line[2:].strip() for line in section[1].splitlines() if line.startswith("- ")]
    return [i for i in items if i and not re.match(r"^none( yet)?\.?$", i, re.I)][:50]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


_LABELS: Final = {"execute": "Execute", "plan": "Plan", "discuss": "Discuss"}


def _command(phase: _Phase, prefix: str) -> str | None:
    return f"{prefix}{phase.action}-phase {phase.number}" if phase.action else None


def _wire_phase(phase: _Phase, prefix: str) -> GsdPhase:
    return GsdPhase(
        number=phase.number,
        name=phase.name,
        diskStatus=phase.disk_status,
        plans=len(phase.plans),
        summaries=len(phase.summaries),
        recentlyTouched=phase.recently_touched,
        action=phase.action,
        command=_command(phase, prefix),
        planCount=phase.plan_count,
        needsYou=None,
    )


def _actions(phases: list[_Phase], prefix: str, paused: bool) -> list[GsdAction]:
    actions: list[GsdAction] = []
    if paused:
        actions.append(
            GsdAction(
                id="resume-work",
                label="Resume paused work",
                command=f"{prefix}resume-work",
                recommended=False,
            )
        )
    for phase in phases:
        command = _command(phase, prefix)
        if command is not None and phase.action is not None:
            label = f"{_LABELS[phase.action]} phase {phase.number}: {phase.name}"
            actions.append(
                GsdAction(
                    id=f"{phase.action}-{phase.number}",
                    label=label,
                    command=command,
                    recommended=False,
                )
            )
    if phases and all(p.disk_status == "complete" for p in phases):
        actions.append(
            GsdAction(
                id="complete-milestone",
                label="Complete the milestone",
                command=f"{prefix}complete-milestone",
                recommended=False,
            )
        )
    actions.append(
        GsdAction(
            id="progress", label="Show progress", command=f"{prefix}progress", recommended=False
        )
    )
    first = actions[0]
    actions[0] = GsdAction(id=first.id, label=first.label, command=first.command, recommended=True)
    return actions


def _situation(
    phases: list[_Phase],
    current: _Phase | None,
    executing: _Phase | None,
    paused: bool,
    verify_failed: bool,
) -> str:
    if not phases:
        return "Project set up; no roadmap phases yet"
    if paused and current is not None:
        return f"Paused in phase {current.number} ({current.name})"
    if verify_failed:
        failed = next(p for p in phases if p.verify_failed)
        return f"Verification found gaps in phase {failed.number} ({failed.name})"
    if executing is not None:
        done = min(len(executing.summaries), len(executing.plans))
        return (
            f"Executing phase {executing.number} ({executing.name}): "
            f"{done} of {len(executing.plans)} plans done"
        )
    if all(p.disk_status == "complete" for p in phases):
        return f"All {_plural(len(phases), 'phase')} complete"
    upcoming = next((p for p in phases if p.action is not None), None)
    if upcoming is not None and upcoming.action is not None:
        return f"Next: {upcoming.action} phase {upcoming.number} ({upcoming.name})"
    return "Waiting on dependencies"
