"""An ACP agent's ``session/update`` notifications → CodeDeck v10 transcript entries.

Pure: :class:`UpdateMapper` takes each update as the JSON object of the wire (camelCase, as the
SDK's models dump with ``by_alias``) and returns the ``OutputEntry`` objects it completes. It
works on JSON rather than on the SDK's pydantic classes so that it reads every agent's variant of
a field the same way and can be tested with plain dicts.

==========================================  ======================================================
``agent_message_chunk``                      assistant ``text``: chunks are joined, one entry per
                                             message (flushed when another kind of update, another
                                             ``messageId`` or the end of the prompt comes)
``agent_thought_chunk``                      ``thinking``, joined the same way
``user_message_chunk``                       nothing (the bridge wrote the user's entry itself; a
                                             resume's replay is counted by the driver)
``tool_call`` / ``tool_call_update``         ``tool_use`` once the call runs (``in_progress``; a
                                             pending call's input is often not known yet: OpenCode
                                             sends only its cwd) or a permission is asked for it,
                                             then ``tool_result`` when
                                             it is ``completed`` / ``failed`` (cut at 2,000
                                             characters); ``diff`` content → a ``diff`` entry
                                             when every phone can show one
``plan``                                     a ``TodoWrite`` ``tool_use`` (the phone's todo list,
                                             as Claude Code's plans arrive)
``usage_update``                             kept for the turn's result (context meter)
the prompt's end (``stopReason``)            a ``system`` result (``Interrupted`` when cancelled),
                                             then ``system`` ``""`` with ``stream_end``
anything else                                nothing
==========================================  ======================================================

Tool calls are put in Claude Code's vocabulary by :func:`.tools.gate_call` first, so that the gate,
the cards and :mod:`bridge.agents.tool_render` read them like Claude Code's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from bridge.agents.tool_render import build_diff, diff_fallback_text, tool_result_text, tool_summary
from bridge.host.vocabulary import make_entry

from .tools import GateCall, gate_call

__all__ = ["INTERRUPTED_TEXT", "STOP_TEXTS", "ToolCallState", "UpdateMapper"]

INTERRUPTED_TEXT: Final = "Interrupted"
"""The ``system`` entry of a cancelled prompt (the same words as Claude Code's)."""
STOP_TEXTS: Final[Mapping[str, str]] = {
    "end_turn": "Turn complete",
    "max_tokens": "Stopped: the model reached its output limit",
    "max_turn_requests": "Stopped: the agent reached its limit of model requests for a turn",
    "refusal": "Stopped: the model refused to go on",
}
"""The result text of each ``stopReason`` but ``cancelled``."""

_DONE_KEPT: Final = 256
_STARTED: Final = frozenset({"in_progress", "completed", "failed"})
_FINISHED: Final = frozenset({"completed", "failed"})
_PLAN_STATUS: Final[Mapping[str, str]] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "completed": "completed",
}


@dataclass(slots=True)
class ToolCallState:
    """What is known of one tool call so far (updates only carry what changed)."""

    tool_call_id: str
    raw: dict[str, Any] = field(default_factory=dict)
    started: bool = False
    finished: bool = False
    diffed: bool = False

    def merge(self, update: Mapping[str, Any]) -> None:
        """Fold an update's fields in (``content`` replaces, as ACP says)."""
        for key, value in update.items():
            if key != "sessionUpdate" and value is not None:
                self.raw[key] = value

    def merge_ask(self, ask: Mapping[str, Any]) -> None:
        """Fold a permission request's ``toolCall`` in without losing what the call said.

        An agent may describe the *permission* it asks for rather than the call: OpenCode asks
        ``external_directory`` for a read outside the project (kind ``other``, the folder as
        title, ``{filepath, parentDir}`` as input), then ``read`` with an empty input and no
        location. Replaced by those, the call's own target would be gone and the gate would
        judge a tool it cannot read. So the request only adds: its input keys over the call's,
        its locations after the call's; a request of kind ``other`` (ACP's "anything else")
        about a call whose kind is known is about something beside the call, and leaves the
        call's kind and title as they are. Other fields replace, as in an update.
        """
        aside = ask.get("kind") == "other" and isinstance(self.raw.get("kind"), str)
        for key, value in ask.items():
            if key == "sessionUpdate" or value is None:
                continue
            known = self.raw.get(key)
            if key == "rawInput" and isinstance(value, Mapping) and isinstance(known, Mapping):
                self.raw[key] = {**known, **value}
            elif key == "locations" and isinstance(value, list) and isinstance(known, list):
                self.raw[key] = [*known, *(item for item in value if item not in known)]
            elif not (aside and key in ("kind", "title") and known):
                self.raw[key] = value

    @property
    def call(self) -> GateCall:
        """The call in Claude Code's vocabulary."""
        return gate_call(self.raw)


class UpdateMapper:
    """One session's updates → entries (see the module docstring).

    Args:
        diff_allowed: whether every phone can show ``diff`` entries now (asked per call).
    """

    def __init__(self, diff_allowed: Callable[[], bool]) -> None:
        self._diff_allowed = diff_allowed
        self._open_kind: str | None = None  # "text" / "thinking" while a message is being joined
        self._open_id: str | None = None
        self._parts: list[str] = []
        self._tools: dict[str, ToolCallState] = {}
        self._done: deque[str] = deque(maxlen=_DONE_KEPT)  # finished calls: late updates ignored
        self._usage: dict[str, Any] | None = None
        self.model: str | None = None
        """The model named on assistant entries (the driver keeps it current)."""

    # -- updates --------------------------------------------------------------------------------

    def feed(self, update: Mapping[str, Any], ts: str) -> list[dict[str, Any]]:
        """The entries `update` completes (often none: a chunk only adds to a message)."""
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            return self._chunk("text", update, ts)
        if kind == "agent_thought_chunk":
            return self._chunk("thinking", update, ts)
        if kind in ("tool_call", "tool_call_update"):
            entries = self.flush(ts)
            tool_id = update.get("toolCallId")
            if isinstance(tool_id, str) and tool_id:
                entries += self._tool(tool_id, update, ts)
            return entries
        if kind == "plan":
            return self.flush(ts) + self._plan(update, ts)
        if kind == "usage_update":
            used, size = update.get("used"), update.get("size")
            if _count(used) and _count(size):
                self._usage = {"used": used, "size": size, "cost": update.get("cost")}
            return []
        if kind == "user_message_chunk":
            return self.flush(ts)
        return []

    def tool_state(self, update: Mapping[str, Any]) -> ToolCallState | None:
        """The state of the call a permission request names, `update`'s fields added to it
        (:meth:`ToolCallState.merge_ask`)."""
        tool_id = update.get("toolCallId")
        if not isinstance(tool_id, str) or not tool_id:
            return None
        state = self._tools.setdefault(tool_id, ToolCallState(tool_id))
        state.merge_ask(update)
        return state

    def show_call(self, state: ToolCallState, ts: str) -> list[dict[str, Any]]:
        """The call's ``tool_use`` (and diff) now if not shown yet: a permission card names a
        call, so the phone must see the call before its card."""
        return self.flush(ts) + self._start(state, ts)

    def refuse(self, state: ToolCallState, text: str, ts: str) -> list[dict[str, Any]]:
        """The call was refused (the gate's deny list, or the phone): its ``tool_result`` says
        why now, and what the agent reports of it later is ignored (OpenCode says "the user
        rejected", Gemini CLI says nothing at all)."""
        if state.finished:
            return []
        entries = self.show_call(state, ts)
        state.finished = True
        self._tools.pop(state.tool_call_id, None)
        self._done.append(state.tool_call_id)
        metadata = {"tool_use_id": state.tool_call_id, "is_error": True}
        return [*entries, make_entry("tool_result", text, ts, metadata)]

    def end_turn(
        self,
        stop_reason: str | None,
        usage: Mapping[str, Any] | None,
        ts: str,
        *,
        error: str | None = None,
    ) -> list[dict[str, Any]]:
        """The entries that close a prompt: what was pending, the result (an ``error`` entry
        when the prompt failed), ``stream_end``."""
        entries = self.flush(ts)
        # A call the agent never finished (cancelled, or it ended the turn without a word) is
        # closed first, so that no phone shows it spinning for ever.
        for state in self._tools.values():
            if state.started and not state.finished:
                metadata = {"tool_use_id": state.tool_call_id, "is_error": True}
                entries.append(make_entry("tool_result", INTERRUPTED_TEXT, ts, metadata))
        self._tools.clear()
        if error is not None:
            entries.append(make_entry("error", error, ts, {"error_type": "agent_error"}))
        elif stop_reason == "cancelled":
            entries.append(make_entry("system", INTERRUPTED_TEXT, ts, {"subtype": "interrupted"}))
        else:
            entries.append(self._turn_result(stop_reason, usage, ts))
        entries.append(make_entry("system", "", ts, {"stream_end": True}))
        return entries

    def _turn_result(
        self, stop_reason: str | None, usage: Mapping[str, Any] | None, ts: str
    ) -> dict[str, Any]:
        text = STOP_TEXTS.get(stop_reason or "", f"Stopped: {stop_reason or 'unknown reason'}")
        metadata: dict[str, Any] = {"subtype": "result", "stop_reason": stop_reason}
        if usage:
            metadata["usage"] = dict(usage)
        if self._usage is not None:
            used, size = self._usage["used"], self._usage["size"]
            if size > 0:
                metadata["context_window"] = size
                metadata["context_percentage"] = max(0, min(100, round(100 * used / size)))
            cost = self._usage.get("cost")
            if isinstance(cost, Mapping) and isinstance(cost.get("amount"), int | float):
                metadata["total_cost_usd"] = float(cost["amount"])
        return make_entry("system", text, ts, metadata)

    def flush(self, ts: str) -> list[dict[str, Any]]:
        """The message being joined, as one entry (nothing when none is open or it is empty)."""
        kind, parts = self._open_kind, self._parts
        self._open_kind, self._open_id, self._parts = None, None, []
        text = "".join(parts)
        if kind is None or not text.strip():
            return []
        metadata: dict[str, Any] = {"role": "assistant"}
        if self.model:
            metadata["model"] = self.model
        return [make_entry(kind, text, ts, metadata)]

    # -- pieces ---------------------------------------------------------------------------------

    def _chunk(self, kind: str, update: Mapping[str, Any], ts: str) -> list[dict[str, Any]]:
        content = update.get("content")
        text = content.get("text") if isinstance(content, Mapping) else None
        message_id = update.get("messageId")
        message_id = message_id if isinstance(message_id, str) else None
        entries: list[dict[str, Any]] = []
        if self._open_kind != kind or (message_id is not None and message_id != self._open_id):
            entries = self.flush(ts)
            self._open_kind, self._open_id = kind, message_id
        if isinstance(text, str):
            self._parts.append(text)
        return entries

    def _tool(self, tool_id: str, update: Mapping[str, Any], ts: str) -> list[dict[str, Any]]:
        if tool_id in self._done:
            return []
        state = self._tools.setdefault(tool_id, ToolCallState(tool_id))
        state.merge(update)
        entries: list[dict[str, Any]] = []
        status = state.raw.get("status")
        if not state.started and status in _STARTED:
            entries += self._start(state, ts)
        elif state.started and not state.diffed:
            entries += self._diff(state, ts)
        if status in _FINISHED and not state.finished:
            if not state.started:
                entries += self._start(state, ts)
            state.finished = True
            entries.append(self._result(state, failed=status == "failed", ts=ts))
            del self._tools[tool_id]
            self._done.append(tool_id)
        return entries

    def _start(self, state: ToolCallState, ts: str) -> list[dict[str, Any]]:
        if state.started:
            return []
        state.started = True
        call = state.call
        metadata = {
            "role": "assistant",
            "tool_name": call.tool_name,
            "tool_use_id": state.tool_call_id,
            "tool_input": dict(call.tool_input),
        }
        entry = make_entry("tool_use", tool_summary(call.tool_name, call.tool_input), ts, metadata)
        return [entry, *self._diff(state, ts)]

    def _diff(self, state: ToolCallState, ts: str) -> list[dict[str, Any]]:
        if state.diffed or not self._diff_allowed():
            return []
        for item in _list(state.raw.get("content")):
            if isinstance(item, Mapping) and item.get("type") == "diff":
                path, new = item.get("path"), item.get("newText")
                if not isinstance(path, str) or not isinstance(new, str):
                    continue
                old = item.get("oldText")
                tool_input: dict[str, Any]
                if isinstance(old, str) and old:
                    tool_input = {"file_path": path, "old_string": old, "new_string": new}
                    diff = build_diff("Edit", tool_input)
                else:
                    diff = build_diff("Write", {"file_path": path, "content": new})
                if diff is None:
                    continue
                state.diffed = True
                metadata = {
                    "role": "assistant",
                    "tool_name": state.call.tool_name,
                    "tool_use_id": state.tool_call_id,
                }
                return [make_entry("diff", diff_fallback_text(diff), ts, metadata, diff=diff)]
        return []

    def _result(self, state: ToolCallState, *, failed: bool, ts: str) -> dict[str, Any]:
        metadata: dict[str, Any] = {"tool_use_id": state.tool_call_id}
        if failed:
            metadata["is_error"] = True
        return make_entry("tool_result", tool_result_text(_result_content(state.raw)), ts, metadata)

    def _plan(self, update: Mapping[str, Any], ts: str) -> list[dict[str, Any]]:
        todos = []
        for item in _list(update.get("entries")):
            if isinstance(item, Mapping) and isinstance(content := item.get("content"), str):
                status = _PLAN_STATUS.get(str(item.get("status")), "pending")
                todos.append({"content": content, "status": status, "activeForm": content})
        if not todos:
            return []
        tool_input = {"todos": todos}
        metadata = {"role": "assistant", "tool_name": "TodoWrite", "tool_input": tool_input}
        return [make_entry("tool_use", tool_summary("TodoWrite", tool_input), ts, metadata)]


def _result_content(raw: Mapping[str, Any]) -> Any:
    """What a finished call returned: its text content, else its raw output."""
    texts: list[str] = []
    for item in _list(raw.get("content")):
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "content":
            block = item.get("content")
            if isinstance(block, Mapping) and isinstance(text := block.get("text"), str):
                texts.append(text)
        elif item.get("type") == "diff" and isinstance(path := item.get("path"), str):
            texts.append(f"Edited {path}")
    if texts:
        return "\n".join(texts)
    output = raw.get("rawOutput")
    if isinstance(output, Mapping):
        for key in ("output", "stdout", "result", "content", "error"):
            if isinstance(value := output.get(key), str):
                return value
    return output if output is not None else ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
