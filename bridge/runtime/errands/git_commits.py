"""Did a commit land in a session's project? (the heartbeat's ``committed: true``).

The base ``HEAD`` of each session's cwd is read when the session is first seen running; a
commit shows as ``HEAD`` moving. The check runs every 10 s (REFERENCE-BEHAVIOUR §1.9) and at
once after the agent ran a Bash ``git commit`` (the fast path), in a thread: git is a process.
A directory that is not a git repository, or a git that is missing, simply never reports.

The watcher looks at agent events on their way to the engine (:meth:`CommitWatcher.observe`):
``AgentReady`` starts watching the session, a Bash ``git commit`` entry takes the fast path. Its
work runs in a :class:`~bridge.tasks.TaskSet` of its own; the poll loop is one of them.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import Callable
from pathlib import Path

from bridge.engine.effects import SessionRecord
from bridge.engine.inputs import AgentEntry, AgentReady, Input, SessionCommitted
from bridge.tasks import TaskSet

__all__ = ["CommitWatcher", "git_head", "is_git_commit"]

logger = logging.getLogger(__name__)

POLL_SECONDS = 10.0


def git_head(cwd: Path) -> str | None:
    """The commit ``HEAD`` points at, or None (not a repository, no commit yet, no git)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    head = done.stdout.strip()
    return head if done.returncode == 0 and head else None


def is_git_commit(command: str) -> bool:
    """The fast path's test: a Bash command that runs ``git commit`` (not ``--help``)."""
    return "git commit" in command and "--help" not in command


class CommitWatcher:
    """Remembers each session's base HEAD and reports the first move of it."""

    def __init__(
        self,
        feed: Callable[[Input], None],
        *,
        record_of: Callable[[str], SessionRecord | None] = lambda _session_id: None,
    ) -> None:
        self._feed = feed
        self._record_of = record_of
        self._base: dict[str, str | None] = {}
        self._cwd: dict[str, Path] = {}
        self._reported: set[str] = set()
        self._tasks = TaskSet("commit watcher", logger=logger)

    def start(self) -> None:
        """Start polling every :data:`POLL_SECONDS`."""
        self._tasks.spawn(self.run(), "commit-poll")

    async def close(self) -> None:
        await self._tasks.close()

    def observe(self, event: Input) -> None:
        """A look at an agent event on its way to the engine."""
        if isinstance(event, AgentReady):
            record = self._record_of(event.session_id)
            cwd = event.cwd or (record.cwd if record is not None else None)
            if cwd:
                committed = bool(record is not None and record.committed)
                watch = self.watch(event.session_id, Path(cwd), committed=committed)
                self._tasks.spawn(watch, f"commit-watch {event.session_id[:8]}")
        elif isinstance(event, AgentEntry):
            metadata = event.entry.metadata or {}
            tool_input = metadata.get("tool_input")
            if (
                event.entry.entryType == "tool_use"
                and metadata.get("tool_name") == "Bash"
                and isinstance(tool_input, dict)
                and is_git_commit(str(tool_input.get("command", "")))
            ):
                soon = self.check_soon(event.session_id)
                self._tasks.spawn(soon, f"commit-check {event.session_id[:8]}")

    async def watch(self, session_id: str, cwd: Path, *, committed: bool) -> None:
        if session_id in self._cwd:
            return
        self._cwd[session_id] = cwd
        if committed:
            self._reported.add(session_id)
            return
        self._base[session_id] = await asyncio.to_thread(git_head, cwd)

    def forget(self, session_id: str) -> None:
        self._cwd.pop(session_id, None)
        self._base.pop(session_id, None)
        self._reported.discard(session_id)

    async def check(self, session_id: str | None = None) -> None:
        """Compare HEADs (one session, or all) and report the sessions that got a commit."""
        targets = [session_id] if session_id is not None else list(self._cwd)
        for sid in targets:
            cwd = self._cwd.get(sid)
            if cwd is None or sid in self._reported:
                continue
            head = await asyncio.to_thread(git_head, cwd)
            base = self._base.get(sid)
            if head is not None and head != base:
                self._reported.add(sid)
                self._feed(SessionCommitted(sid))

    async def check_soon(self, session_id: str, delay: float = 3.0) -> None:
        """The fast path: the agent ran ``git commit``; look once it had time to finish."""
        await asyncio.sleep(delay)
        await self.check(session_id)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            try:
                await self.check()
            except Exception:
                logger.exception("! checking sessions for commits failed")
