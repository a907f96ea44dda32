"""The daemon's answers to the editor's ``tasks.*`` control methods.

The contract is :mod:`bridge.control.task_methods`. Changes go to the engine as inputs
(``TaskStartRequested``, ``TaskCardAnswered``, …), so the control socket never writes engine
state behind the engine loop's back. ``tasks.watch`` reads transcript lines from the store
(durable, by seq) and cards and state from the engine's memory, and waits for the engine loop's
:class:`~bridge.runtime.progress.Progress` signal, raised after each input's effects are
performed: an editor hears of a card in the step of the loop that committed it. (A card read
from memory can precede its commit by that step; were the commit to fail, the daemon stops, and
the session host asks again with the same card id when it is back.)
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from bridge.control.methods import HandlerError
from bridge.control.task_methods import (
    WATCH_BATCH,
    CardView,
    QueuedResult,
    TaskStartResult,
    TasksWatchResult,
    TaskView,
)
from bridge.control.terminal_text import safe_text
from bridge.engine.core import Engine
from bridge.engine.effects import TaskPolicy
from bridge.engine.inputs import (
    Input,
    TaskCardAnswered,
    TaskEditsReported,
    TaskInputRequested,
    TaskStartRequested,
    TaskStopRequested,
)
from bridge.runtime.progress import Progress
from store import bridge_state
from store.db import BridgeDatabase

__all__ = ["DaemonTasks"]

logger = logging.getLogger(__name__)

Cursor = tuple[int, frozenset[str], str | None]


class DaemonTasks:
    """The ``tasks_*`` handler methods (delegated to by the daemon's control handler)."""

    def __init__(
        self,
        *,
        engine: Engine,
        db: BridgeDatabase,
        feed: Callable[[Input], None],
        progress: Progress,
    ) -> None:
        self._engine = engine
        self._db = db
        self._feed = feed
        self._progress = progress

    async def start(
        self,
        session_id: str,
        cwd: str,
        instruction: str,
        allowed_tools: tuple[str, ...],
        max_tool_calls: int,
        title: str | None,
        model: str | None,
        strict: bool = False,
        judge: bool = False,
    ) -> TaskStartResult:
        if self._engine.session(session_id) is None:
            if not await asyncio.to_thread(Path(cwd).is_dir):
                raise HandlerError(
                    f"the workspace {safe_text(cwd, limit=200)} is not a directory on this "
                    "machine; open a folder in the editor"
                )
            policy = TaskPolicy(allowed_tools, max_tool_calls, strict, judge)
            self._feed(TaskStartRequested(session_id, cwd, instruction, policy, title, model))
        return {"session_id": session_id}

    async def watch(self, cursors: Mapping[str, Cursor], timeout: float) -> TasksWatchResult:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            generation = self._progress.generation
            views = {sid: await self._view(sid, cursor) for sid, cursor in cursors.items()}
            changed = {sid: v for sid, v in views.items() if _changed(v, cursors[sid])}
            left = deadline - loop.time()
            if changed or left <= 0:
                return {"sessions": changed or views}
            await self._progress.wait_past(generation, left)

    async def _view(self, session_id: str, cursor: Cursor) -> TaskView:
        record = self._engine.session(session_id)
        if record is None:
            return {"exists": False, "state": None, "alive": False, "entries": [], "cards": []}
        after = cursor[0]
        rows = await bridge_state.read_transcript(
            self._db, session_id, after + 1, after + WATCH_BATCH
        )
        entries = [{"seq": seq, "entry": json.loads(text)} for seq, text in rows]
        cards: list[CardView] = []
        for card in self._engine.pending_cards(session_id):
            cards.append(
                {
                    "id": card.request_id,
                    "kind": card.kind,
                    "tool": card.tool_name,
                    "input": card.tool_input,
                    "reasons": list(card.reasons),
                }
            )
        # A session still starting is alive for the watcher; one whose agent ended is not.
        ended = self._engine.has_ended(session_id)
        return {
            "exists": True,
            "state": "ended" if ended else record.state,
            "alive": not ended,
            "entries": entries,
            "cards": cards,
        }

    async def answer(
        self, session_id: str, card_id: str, allow: bool, scope: str | None, reason: str | None
    ) -> QueuedResult:
        if not self._pending(session_id, card_id, "permission"):
            return {"queued": False, "reason": "no such pending card (answered already?)"}
        self._feed(TaskCardAnswered(session_id, card_id, allow, scope, reason))
        return {"queued": True}

    async def report(
        self, session_id: str, card_id: str, report: tuple[dict[str, str], ...]
    ) -> QueuedResult:
        if not self._pending(session_id, card_id, "review"):
            return {"queued": False, "reason": "no such open edit review"}
        self._feed(TaskEditsReported(session_id, card_id, report))
        return {"queued": True}

    async def input(self, session_id: str, text: str) -> QueuedResult:
        if self._engine.session(session_id) is None:
            return {"queued": False, "reason": "no such session"}
        self._feed(TaskInputRequested(session_id, text))
        return {"queued": True}

    async def stop(self, session_id: str) -> QueuedResult:
        if self._engine.session(session_id) is None:
            return {"queued": False, "reason": "no such session"}
        self._feed(TaskStopRequested(session_id))
        return {"queued": True}

    def _pending(self, session_id: str, card_id: str, kind: str) -> bool:
        return any(
            card.request_id == card_id and card.kind == kind
            for card in self._engine.pending_cards(session_id)
        )


def _changed(view: TaskView, cursor: Cursor) -> bool:
    _after, cards, state = cursor
    if view["entries"]:
        return True
    if not view["exists"]:
        return True
    if frozenset(card["id"] for card in view["cards"]) != cards:
        return True
    return view["state"] != state
