"""SDK messages → v10 transcript entries (PROTOCOL-v10-wire.md §4.3), one session at a time.

:class:`Adapter` is pure: no I/O, no clock (the caller passes each entry's timestamp), no logging
of content. It is stateful because Claude Code's stream is:

- **One ``AssistantMessage`` per content block.** A text block arrives before the tool call of the
  same API message (same ``message_id``), yet its ``display_hint`` depends on that call
  (``collapse`` when the message also calls tools, else ``show``). Entries of a main-thread
  message are therefore held until the message either calls a tool (they go out at once, marked
  ``collapse``, followed by the call) or ends (another message, a user frame or the result
  arrives: they go out as ``show``; side-band ``system`` frames such as ``status`` or
  ``thinking_tokens`` do not end a message). Sub-agent messages (``parent_tool_use_id`` set) are always ``collapse`` and
  never held. :meth:`Adapter.flush` releases what is held, e.g. when the stream ends.
- **``system/init`` at the start of every turn.** Only the first becomes the
  ``"Claude Code <ver> (<model>)"`` entry.
- **Cumulative cost.** ``ResultMessage.total_cost_usd`` adds up over the session, even across
  ``resume``; the turn's cost is the difference with the previous result
  (:attr:`Adapter.last_total_cost` is seeded from the transcript when a session is resumed).

Other rules: ``AskUserQuestion`` and ``ExitPlanMode`` never show as ``tool_use`` (their cards are
the engine's), nor do their results; thinking with no text is a redacted one (``""`` +
``redacted:true``); an ``AssistantMessage`` carrying ``error`` is an ``error`` entry (a special
``auth_error`` one for ``authentication_failed``), not assistant text; a failed result adds an
``error`` entry unless the turn already reported its error that way, and an interrupted turn (a
result whose ``terminal_reason`` is ``aborted_*``) a ``system`` entry ``Interrupted``; every
result ends with ``stream_end``.

Session meta: the ``<!-- session-meta: {"topic", "project"} -->`` tag is stripped from every
assistant text; the first valid one rides on the metadata of the entry it came in, as
``session_meta: {"topic", "project"}`` (each at most 40 characters), for the engine to take the
title and project from (an entry whose text was nothing but the tag is still emitted, with
``content: ""``, so that the meta is not lost).

The result entry also carries the context meter of the heartbeat: ``context_window`` (the model's
``contextWindow`` from ``modelUsage``) and ``context_percentage`` (the last call's tokens over it).

Echo suppression: :meth:`Adapter.authored` remembers the last 16 texts the bridge sent; a user
message of exactly such a text is the agent's echo and is dropped (each echo consumes one).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    ServerToolResultBlock,
    ServerToolUseBlock,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from pydantic import ValidationError

from bridge.protocol import OutputEntry
from bridge.protocol.enums import OutputEntryType

from .render import build_diff, diff_fallback_text, tool_result_text, tool_summary

__all__ = [
    "AUTHORED_MEMORY",
    "CARD_TOOLS",
    "INTERRUPTED_TEXT",
    "META_FIELD_CHARS",
    "Adapter",
    "SessionMeta",
    "parse_session_meta",
    "strip_session_meta",
]

CARD_TOOLS: Final = frozenset({"AskUserQuestion", "ExitPlanMode"})
"""Tools the engine shows as cards: never a ``tool_use`` entry, nor a ``tool_result``."""
AUTHORED_MEMORY: Final = 16
META_FIELD_CHARS: Final = 40
INTERRUPTED_TEXT: Final = "Interrupted"
_SYNTHETIC_MODEL: Final = "<synthetic>"
_AUTH_ERROR: Final = "authentication_failed"
_ABORTED: Final = frozenset({"aborted_streaming", "aborted_tools"})
_INTERRUPT_MARKER: Final = "[Request interrupted by user"
_LOCAL_STDOUT: Final = re.compile(r"^<local-command-stdout>(.*)</local-command-stdout>$", re.DOTALL)
_META_TAG: Final = re.compile(r"<!--\s*session-meta:(.*?)-->", re.DOTALL)


@dataclass(frozen=True, slots=True)
class SessionMeta:
    """What the model answered to the bridge's session-meta request."""

    topic: str
    project: str


def parse_session_meta(text: str) -> SessionMeta | None:
    """The first valid session-meta tag of `text`: a JSON object with a string topic or project."""
    for match in _META_TAG.finditer(text):
        try:
            value = json.loads(match.group(1))
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        topic, project = value.get("topic"), value.get("project")
        topic = topic.strip()[:META_FIELD_CHARS] if isinstance(topic, str) else ""
        project = project.strip()[:META_FIELD_CHARS] if isinstance(project, str) else ""
        if topic or project:
            return SessionMeta(topic, project)
    return None


def strip_session_meta(text: str) -> str:
    """`text` without any session-meta tag (valid or not), trimmed when a tag was removed."""
    stripped, count = _META_TAG.subn("", text)
    return stripped.strip() if count else text


@dataclass(slots=True)
class _Held:
    """Entries of the current main-thread message, held until its display hint is known."""

    message_id: str | None
    entries: list[OutputEntry]
    texts: list[int]  # indexes of the assistant text entries, whose hint is still open
    released: bool  # the message called a tool: the rest of it is released at once


class Adapter:
    """Converts one session's SDK messages to entries (see the module docstring).

    Args:
        diff_allowed: asked at each Edit/Write/MultiEdit call whether the §9 diff gate is open
            (every phone heard from this boot sent ``diff`` in ``caps``).
    """

    def __init__(self, *, diff_allowed: Callable[[], bool] = lambda: False) -> None:
        self._diff_allowed = diff_allowed
        self._held: _Held | None = None
        self._usage_reported: deque[str] = deque(maxlen=64)
        self._card_tool_ids: deque[str] = deque(maxlen=256)
        self._authored: deque[str] = deque(maxlen=AUTHORED_MEMORY)
        self._init_seen = False
        self._meta_found = False
        self._turn_error_reported = False
        self._context: tuple[str, int] | None = None
        self.last_total_cost: float | None = None
        """The cumulative cost of the last result (``total_cost_usd``), for the next delta."""

    # -- inputs from the runner -----------------------------------------------------------------

    def authored(self, text: str) -> None:
        """Remember a text the bridge sent, so that its echo is dropped."""
        self._authored.append(text)

    @property
    def meta_found(self) -> bool:
        """Whether a session-meta tag was already reported (later ones are only stripped)."""
        return self._meta_found

    def convert(self, message: object, timestamp: str) -> list[OutputEntry]:
        """The entries `message` releases now (held ones of an earlier message included)."""
        if isinstance(message, AssistantMessage):
            return self._assistant(message, timestamp)
        if isinstance(message, UserMessage):
            return self.flush() + self._user(message, timestamp)
        if isinstance(message, ResultMessage):
            return self.flush() + self._result(message, timestamp)
        if isinstance(message, SystemMessage):
            # Side-band frames (status, thinking_tokens, api_retry, task progress) may come
            # between the blocks of one message: only one that shows something ends it.
            entries = self._system(message, timestamp)
            return self.flush() + entries if entries else []
        return []  # rate-limit events and the like: nothing to show

    def flush(self) -> list[OutputEntry]:
        """Release the held entries of the current message, text shown (``display_hint: show``)."""
        held, self._held = self._held, None
        if held is None:
            return []
        return [
            _with(entry, display_hint="show") if i in held.texts else entry
            for i, entry in enumerate(held.entries)
        ]

    # -- assistant ------------------------------------------------------------------------------

    def _assistant(self, message: AssistantMessage, ts: str) -> list[OutputEntry]:
        if message.error:
            self._turn_error_reported = True
            return [*self.flush(), self._api_error(message, ts)]
        subagent = message.parent_tool_use_id is not None
        fresh: list[OutputEntry] = []
        calls_tool = False
        for block in message.content:
            if isinstance(block, (ToolUseBlock, ServerToolUseBlock)):
                calls_tool = True
                fresh += self._tool_use(block.name, block.id, block.input, subagent, ts)
            elif isinstance(block, TextBlock):
                fresh += self._text(block.text, message.model, subagent, ts)
            elif isinstance(block, ThinkingBlock):
                fresh.append(self._thinking(block, message.model, subagent, ts))
            elif isinstance(block, (ToolResultBlock, ServerToolResultBlock)):
                fresh += self._tool_result(block.tool_use_id, block.content, False, subagent, ts)
        fresh += self._usage(message, ts)
        if subagent:
            return fresh  # sub-agent text is `collapse` already, nothing to wait for
        out: list[OutputEntry] = []
        held = self._held
        if held is None or held.message_id is None or held.message_id != message.message_id:
            out = self.flush()
            held = self._held = _Held(message.message_id, [], [], released=False)
        if calls_tool and not held.released:
            # The message calls a tool: every text of it (held or new) collapses, and nothing of
            # it is held any more, so that the call's permission card can follow at once.
            held.released = True
            fresh = held.entries + fresh
            held.entries, held.texts = [], []
        if held.released:
            return out + [_with(e, display_hint="collapse") if _is_text(e) else e for e in fresh]
        for entry in fresh:
            if _is_text(entry):
                held.texts.append(len(held.entries))
            held.entries.append(entry)
        return out

    def _text(self, text: str, model: str, subagent: bool, ts: str) -> list[OutputEntry]:
        metadata: dict[str, Any] = {"role": "assistant", "model": model}
        if not self._meta_found and (meta := parse_session_meta(text)) is not None:
            self._meta_found = True
            metadata["session_meta"] = {"topic": meta.topic, "project": meta.project}
        content = strip_session_meta(text)
        if not content and "session_meta" not in metadata:
            return []
        if subagent:
            metadata["display_hint"] = "collapse"
            metadata["subagent"] = True
        return [_entry("text", content, ts, metadata)]

    def _thinking(self, block: ThinkingBlock, model: str, subagent: bool, ts: str) -> OutputEntry:
        metadata: dict[str, Any] = {"role": "assistant", "model": model}
        if not block.thinking:
            metadata["redacted"] = True
        if subagent:
            metadata["subagent"] = True
        return _entry("thinking", block.thinking, ts, metadata)

    def _tool_use(
        self, name: str, tool_id: str, tool_input: dict[str, Any], subagent: bool, ts: str
    ) -> list[OutputEntry]:
        if name in CARD_TOOLS:
            self._card_tool_ids.append(tool_id)
            return []
        metadata: dict[str, Any] = {
            "role": "assistant",
            "tool_name": name,
            "tool_use_id": tool_id,
            "tool_input": tool_input,
        }
        if subagent:
            metadata["subagent"] = True
        entries = [_entry("tool_use", tool_summary(name, tool_input), ts, metadata)]
        diff = build_diff(name, tool_input)
        if diff is not None and self._diff_allowed():
            diff_meta = {k: v for k, v in metadata.items() if k != "tool_input"}
            entries.append(
                _entry("diff", diff_fallback_text(diff), ts, diff_meta, diff=diff.model_dump())
            )
        return entries

    def _tool_result(
        self, tool_id: str, content: Any, is_error: bool | None, subagent: bool, ts: str
    ) -> list[OutputEntry]:
        if tool_id in self._card_tool_ids:
            return []
        metadata: dict[str, Any] = {"tool_use_id": tool_id}
        if is_error:
            metadata["is_error"] = True
        if subagent:
            metadata["subagent"] = True
        return [_entry("tool_result", tool_result_text(content), ts, metadata)]

    def _usage(self, message: AssistantMessage, ts: str) -> list[OutputEntry]:
        usage = message.usage
        key = message.message_id
        if not isinstance(usage, dict) or message.model == _SYNTHETIC_MODEL or key is None:
            return []
        if key in self._usage_reported:
            return []
        self._usage_reported.append(key)
        tokens_in = sum(
            value
            for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            if isinstance(value := usage.get(name), int)
        )
        tokens_out = usage.get("output_tokens")
        tokens_out = tokens_out if isinstance(tokens_out, int) else 0
        if message.parent_tool_use_id is None:
            # What the model saw on this call: the context in use (what `/context` counts too).
            self._context = (message.model, tokens_in + tokens_out)
        return [
            _entry("system", f"Tokens: {tokens_in} in / {tokens_out} out", ts, {"usage": usage})
        ]

    def _api_error(self, message: AssistantMessage, ts: str) -> OutputEntry:
        text = " ".join(b.text for b in message.content if isinstance(b, TextBlock)).strip()
        if message.error == _AUTH_ERROR:
            content = f"Authentication failed: {text or 'the API refused the credentials'}"
            return _entry("error", content, ts, {"special": "auth_error"})
        return _entry(
            "error", text or f"API error: {message.error}", ts, {"error_type": str(message.error)}
        )

    # -- user, result, system -------------------------------------------------------------------

    def _user(self, message: UserMessage, ts: str) -> list[OutputEntry]:
        subagent = message.parent_tool_use_id is not None
        if isinstance(message.content, str):
            return self._user_text(message.content, ts)
        entries: list[OutputEntry] = []
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                entries += self._tool_result(
                    block.tool_use_id, block.content, block.is_error, subagent, ts
                )
            elif isinstance(block, TextBlock) and not subagent:
                entries += self._user_text(block.text, ts)
        return entries

    def _user_text(self, text: str, ts: str) -> list[OutputEntry]:
        if text in self._authored:
            self._authored.remove(text)  # the echo of what the bridge sent: consumed
            return []
        if not text.strip() or text.startswith(_INTERRUPT_MARKER):
            return []  # the interrupt is reported by the result (`Interrupted`)
        if (local := _LOCAL_STDOUT.match(text.strip())) is not None:
            return [_entry("system", local.group(1).strip(), ts, {"subtype": "local_command"})]
        return [_entry("text", text, ts, {"role": "user"})]

    def _result(self, message: ResultMessage, ts: str) -> list[OutputEntry]:
        total = message.total_cost_usd
        previous = self.last_total_cost
        cost = 0.0
        if isinstance(total, (int, float)):
            cost = max(0.0, total - previous) if previous is not None else float(total)
            self.last_total_cost = float(total)
        entries: list[OutputEntry] = []
        if message.terminal_reason in _ABORTED:
            entries.append(_entry("system", INTERRUPTED_TEXT, ts, {"subtype": "interrupted"}))
        elif message.is_error:
            if not self._turn_error_reported:
                entries.append(self._result_error(message, ts))
        else:
            turns = message.num_turns
            metadata: dict[str, Any] = {
                "subtype": "result",
                "duration_ms": message.duration_ms,
                "num_turns": turns,
                "total_cost_usd": total,
                "cost_usd": round(cost, 6),
                "usage": message.usage,
                "model_usage": message.model_usage,
            }
            metadata.update(self._context_meter(message.model_usage))
            text = f"Session complete — {turns} turn{'s' if turns != 1 else ''}, ${cost:.4f}"
            entries.append(_entry("system", text, ts, _drop_none(metadata)))
        self._turn_error_reported = False
        entries.append(_entry("system", "", ts, {"stream_end": True}))
        return entries

    def _context_meter(self, model_usage: Mapping[str, Any] | None) -> dict[str, Any]:
        """``context_window`` / ``context_percentage`` for the heartbeat, from the last call.

        The window is the ``contextWindow`` that ``modelUsage`` gives for the model of the last
        main-thread call; the percentage is that call's tokens over it (rounded, 0-100). The SDK's
        ``get_context_usage()`` computes the same but takes ~2 s on its first call, which would
        hold the turn's end back.
        """
        if self._context is None or not isinstance(model_usage, Mapping):
            return {}
        model, tokens = self._context
        usage = model_usage.get(model)
        candidates = [usage] if isinstance(usage, Mapping) else list(model_usage.values())
        windows = [
            w
            for u in candidates
            if isinstance(u, Mapping) and isinstance(w := u.get("contextWindow"), int) and w > 0
        ]
        if not windows:
            return {}
        window = max(windows)
        return {
            "context_window": window,
            "context_percentage": max(0, min(100, round(100 * tokens / window))),
        }

    def _result_error(self, message: ResultMessage, ts: str) -> OutputEntry:
        errors = [e for e in (message.errors or []) if isinstance(e, str) and e.strip()]
        if errors:
            text = "\n".join(errors)
        elif isinstance(message.result, str) and message.result.strip():
            text = message.result.strip()
        else:
            text = message.subtype
        return _entry("error", text, ts, {"error_type": message.subtype})

    def _system(self, message: SystemMessage, ts: str) -> list[OutputEntry]:
        data = message.data
        if message.subtype == "init" and not self._init_seen:
            self._init_seen = True
            model = str(data.get("model") or "unknown model")
            version = str(data.get("claude_code_version") or "")
            metadata = {
                "subtype": "init",
                "model": model,
                "version": version or None,
                "tools": data.get("tools") if isinstance(data.get("tools"), list) else None,
                "permissionMode": data.get("permissionMode"),
            }
            text = f"Claude Code {version} ({model})" if version else f"Claude Code ({model})"
            return [_entry("system", text, ts, _drop_none(metadata))]
        if message.subtype == "compact_boundary":
            return [_entry("system", "Conversation compacted", ts, {"subtype": "compact_boundary"})]
        return []


def _is_text(entry: OutputEntry) -> bool:
    metadata = entry.metadata or {}
    return entry.entryType == "text" and metadata.get("role") == "assistant"


def _with(entry: OutputEntry, **metadata: Any) -> OutputEntry:
    return entry.model_copy(update={"metadata": {**(entry.metadata or {}), **metadata}})


def _drop_none(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if v is not None}


def _entry(
    entry_type: OutputEntryType,
    content: str,
    timestamp: str,
    metadata: dict[str, Any] | None,
    *,
    diff: dict[str, Any] | None = None,
) -> OutputEntry:
    """An entry; metadata the wire cannot carry (too deep, not JSON) is reduced, never fatal."""
    try:
        return OutputEntry(
            entryType=entry_type, content=content, timestamp=timestamp, metadata=metadata, diff=diff
        )
    except ValidationError:
        flat = {
            k: v
            for k, v in (metadata or {}).items()
            if isinstance(v, (str, bool)) or (isinstance(v, int) and abs(v) < 2**53)
        }
        return OutputEntry(
            entryType=entry_type, content=content, timestamp=timestamp, metadata=flat, diff=diff
        )
