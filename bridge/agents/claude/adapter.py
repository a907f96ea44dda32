"""Claude Code's stream-json frames → v10 transcript entries (PROTOCOL-v10-wire.md §4.3).

:class:`Adapter` is pure: no I/O, no clock (the caller passes each entry's timestamp), no logging
of content. It reads the CLI's frames as printed on stdout (plain JSON objects; control frames
never reach it) and writes entries as the wire's ``OutputEntry`` JSON objects
(:func:`~bridge.host.vocabulary.make_entry`): it imports neither pydantic nor the SDK, so that a
session host stays lean. It is stateful because Claude Code's stream is:

- **One ``assistant`` frame per content block.** A text block arrives before the tool call of the
  same API message (same ``message.id``), yet its ``display_hint`` depends on that call
  (``collapse`` when the message also calls tools, else ``show``). Entries of a main-thread
  message are therefore held until the message either calls a tool (they go out at once, marked
  ``collapse``, followed by the call) or ends (another message, a ``user`` frame or the
  ``result`` arrives: they go out as ``show``; side-band ``system`` frames such as ``status`` or
  ``thinking_tokens`` do not end a message). Sub-agent messages (``parent_tool_use_id`` set) are
  always ``collapse`` and never held. :meth:`Adapter.flush` releases what is held, e.g. when the
  stream ends.
- **``system/init`` at the start of every turn.** Only the first becomes the
  ``"Claude Code <ver> (<model>)"`` entry.
- **Cumulative cost.** A result's ``total_cost_usd`` adds up over the session, even across
  ``resume``; the turn's cost is the difference with the previous result
  (:attr:`Adapter.last_total_cost` is seeded from the transcript when a session is resumed).

Other rules: ``AskUserQuestion`` and ``ExitPlanMode`` never show as ``tool_use`` (their cards are
the engine's), nor do their results; thinking with no text is a redacted one (``""`` +
``redacted:true``); an ``assistant`` frame carrying ``error`` is an ``error`` entry (a special
``auth_error`` one for ``authentication_failed``), not assistant text; a failed result adds an
``error`` entry unless the turn already reported its error that way, and an interrupted turn (a
result whose ``terminal_reason`` is ``aborted_*``) a ``system`` entry ``Interrupted``; every
result ends with ``stream_end``. ``stream_event``, ``rate_limit_event`` and unknown frame types
show nothing.

Session meta: the ``<!-- session-meta: {"topic", "project"} -->`` tag is stripped from every
assistant text; the first valid one rides on the metadata of the entry it came in, as
``session_meta: {"topic", "project"}`` (each at most 40 characters), for the engine to take the
title and project from (an entry whose text was nothing but the tag is still emitted, with
``content: ""``, so that the meta is not lost).

The result entry also carries the context meter of the heartbeat: ``context_window`` (the model's
``contextWindow`` from ``modelUsage``) and ``context_percentage`` (the last call's tokens over it).

Echo suppression: :meth:`Adapter.authored` remembers the last 16 texts the bridge sent; a user
message of exactly such a text is the agent's echo and is dropped (each echo consumes one).

Malformed frames: a field that is missing or of the wrong type counts as absent — a content
block without its ``type``, ``id`` or ``text`` is skipped, a frame without ``message`` has no
content — so that one bad frame never ends a session (the SDK's parser raised, which ended its
stream). Metadata the wire cannot carry (nested deeper than 64 levels, not JSON) is reduced to
its flat string, bool and safe-integer values, never fatal.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from bridge.agents.tool_render import build_diff, diff_fallback_text, tool_result_text, tool_summary
from bridge.host.vocabulary import make_entry
from bridge.records import record

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
_TOOL_CALLS: Final = frozenset({"tool_use", "server_tool_use"})
# The SDK's parser turned `advisor_tool_result` blocks into tool results too; other server-tool
# result blocks (web search, …) never showed.
_TOOL_RESULTS: Final = frozenset({"tool_result", "advisor_tool_result"})
_TOKEN_FIELDS: Final = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
# What the wire's free-form `metadata` may hold (bridge.protocol.primitives: MAX_JSON_DEPTH and
# the 64-bit range orjson writes); the adapter tests validate every entry against the wire model.
_MAX_JSON_DEPTH: Final = 64
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1
_SAFE_INT: Final = 2**53


@record
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
    entries: list[dict[str, Any]]
    texts: list[int]  # indexes of the assistant text entries, whose hint is still open
    released: bool  # the message called a tool: the rest of it is released at once


@record
class _Assistant:
    """The fields of an ``assistant`` frame the adapter reads (what the SDK's parser took)."""

    blocks: list[Mapping[str, Any]]  # message.content, its JSON objects only
    model: str | None  # message.model
    message_id: str | None  # message.id
    usage: Any  # message.usage
    subagent: bool  # parent_tool_use_id is set
    error: Any  # the frame's `error` (authentication_failed, server_error, …)

    @classmethod
    def parse(cls, frame: Mapping[str, Any]) -> _Assistant:
        message = _mapping(frame.get("message"))
        return cls(
            blocks=_blocks(message.get("content")),
            model=_str_or_none(message.get("model")),
            message_id=_str_or_none(message.get("id")),
            usage=message.get("usage"),
            subagent=frame.get("parent_tool_use_id") is not None,
            error=frame.get("error"),
        )


class Adapter:
    """Converts one session's stream-json frames to entries (see the module docstring).

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
        self._context: tuple[str | None, int] | None = None
        self.last_total_cost: float | None = None
        """The cumulative cost of the last result (``total_cost_usd``), for the next delta."""

    # -- inputs from the driver -----------------------------------------------------------------

    def authored(self, text: str) -> None:
        """Remember a text the bridge sent, so that its echo is dropped."""
        self._authored.append(text)

    @property
    def meta_found(self) -> bool:
        """Whether a session-meta tag was already reported (later ones are only stripped)."""
        return self._meta_found

    def convert(self, frame: Mapping[str, Any], timestamp: str) -> list[dict[str, Any]]:
        """The entries `frame` releases now (held ones of an earlier message included).

        Args:
            frame: one frame of the CLI's stdout, as parsed from JSON (no control frame).
            timestamp: the ISO-8601 time of the new entries
                (:func:`~bridge.host.vocabulary.iso_timestamp`).

        Returns:
            ``OutputEntry`` JSON objects, in transcript order.
        """
        kind = frame.get("type")
        if kind == "assistant":
            return self._assistant(_Assistant.parse(frame), timestamp)
        if kind == "user":
            return self.flush() + self._user(frame, timestamp)
        if kind == "result":
            return self.flush() + self._result(frame, timestamp)
        if kind == "system":
            # Side-band frames (status, thinking_tokens, api_retry, task progress) may come
            # between the blocks of one message: only one that shows something ends it.
            entries = self._system(frame, timestamp)
            return self.flush() + entries if entries else []
        return []  # stream events, rate-limit events, frames of a newer CLI: nothing to show

    def flush(self) -> list[dict[str, Any]]:
        """Release the held entries of the current message, text shown (``display_hint: show``).

        The entries keep the timestamps of the frames they came in.
        """
        held, self._held = self._held, None
        if held is None:
            return []
        return [
            _with(entry, display_hint="show") if i in held.texts else entry
            for i, entry in enumerate(held.entries)
        ]

    # -- assistant ------------------------------------------------------------------------------

    def _assistant(self, message: _Assistant, ts: str) -> list[dict[str, Any]]:
        if message.error:
            self._turn_error_reported = True
            return [*self.flush(), self._api_error(message, ts)]
        subagent = message.subagent
        fresh: list[dict[str, Any]] = []
        calls_tool = False
        for block in message.blocks:
            kind = block.get("type")
            if kind in _TOOL_CALLS:
                tool_id, name = block.get("id"), block.get("name")
                if isinstance(tool_id, str) and isinstance(name, str):
                    calls_tool = True
                    tool_input = _mapping(block.get("input"))
                    fresh += self._tool_use(name, tool_id, tool_input, subagent, ts)
            elif kind == "text":
                if isinstance(text := block.get("text"), str):
                    fresh += self._text(text, message.model, subagent, ts)
            elif kind == "thinking":
                thinking = block.get("thinking")
                thinking = thinking if isinstance(thinking, str) else ""
                fresh.append(self._thinking(thinking, message.model, subagent, ts))
            elif kind in _TOOL_RESULTS and isinstance(tool_id := block.get("tool_use_id"), str):
                fresh += self._tool_result(tool_id, block.get("content"), False, subagent, ts)
        fresh += self._usage(message, ts)
        if subagent:
            return fresh  # sub-agent text is `collapse` already, nothing to wait for
        out: list[dict[str, Any]] = []
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

    def _text(self, text: str, model: str | None, subagent: bool, ts: str) -> list[dict[str, Any]]:
        metadata = _assistant_metadata(model)
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

    def _thinking(
        self, thinking: str, model: str | None, subagent: bool, ts: str
    ) -> dict[str, Any]:
        metadata = _assistant_metadata(model)
        if not thinking:
            metadata["redacted"] = True
        if subagent:
            metadata["subagent"] = True
        return _entry("thinking", thinking, ts, metadata)

    def _tool_use(
        self, name: str, tool_id: str, tool_input: Mapping[str, Any], subagent: bool, ts: str
    ) -> list[dict[str, Any]]:
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
            entries.append(_entry("diff", diff_fallback_text(diff), ts, diff_meta, diff=diff))
        return entries

    def _tool_result(
        self, tool_id: str, content: Any, is_error: Any, subagent: bool, ts: str
    ) -> list[dict[str, Any]]:
        if tool_id in self._card_tool_ids:
            return []
        metadata: dict[str, Any] = {"tool_use_id": tool_id}
        if is_error:
            metadata["is_error"] = True
        if subagent:
            metadata["subagent"] = True
        return [_entry("tool_result", tool_result_text(content), ts, metadata)]

    def _usage(self, message: _Assistant, ts: str) -> list[dict[str, Any]]:
        usage, key = message.usage, message.message_id
        if not isinstance(usage, Mapping) or message.model == _SYNTHETIC_MODEL or key is None:
            return []
        if key in self._usage_reported:
            return []
        self._usage_reported.append(key)
        tokens_in = sum(
            value for name in _TOKEN_FIELDS if isinstance(value := usage.get(name), int)
        )
        tokens_out = usage.get("output_tokens")
        tokens_out = tokens_out if isinstance(tokens_out, int) else 0
        if not message.subagent:
            # What the model saw on this call: the context in use (what `/context` counts too).
            self._context = (message.model, tokens_in + tokens_out)
        return [
            _entry("system", f"Tokens: {tokens_in} in / {tokens_out} out", ts, {"usage": usage})
        ]

    def _api_error(self, message: _Assistant, ts: str) -> dict[str, Any]:
        texts = (block.get("text") for block in message.blocks if block.get("type") == "text")
        text = " ".join(t for t in texts if isinstance(t, str)).strip()
        if message.error == _AUTH_ERROR:
            content = f"Authentication failed: {text or 'the API refused the credentials'}"
            return _entry("error", content, ts, {"special": "auth_error"})
        return _entry(
            "error", text or f"API error: {message.error}", ts, {"error_type": str(message.error)}
        )

    # -- user, result, system -------------------------------------------------------------------

    def _user(self, frame: Mapping[str, Any], ts: str) -> list[dict[str, Any]]:
        subagent = frame.get("parent_tool_use_id") is not None
        content = _mapping(frame.get("message")).get("content")
        if isinstance(content, str):
            return self._user_text(content, ts)
        entries: list[dict[str, Any]] = []
        for block in _blocks(content):
            kind = block.get("type")
            if kind == "tool_result" and isinstance(tool_id := block.get("tool_use_id"), str):
                entries += self._tool_result(
                    tool_id, block.get("content"), block.get("is_error"), subagent, ts
                )
            elif kind == "text" and not subagent and isinstance(text := block.get("text"), str):
                entries += self._user_text(text, ts)
        return entries

    def _user_text(self, text: str, ts: str) -> list[dict[str, Any]]:
        if text in self._authored:
            self._authored.remove(text)  # the echo of what the bridge sent: consumed
            return []
        if not text.strip() or text.startswith(_INTERRUPT_MARKER):
            return []  # the interrupt is reported by the result (`Interrupted`)
        if (local := _LOCAL_STDOUT.match(text.strip())) is not None:
            return [_entry("system", local.group(1).strip(), ts, {"subtype": "local_command"})]
        return [_entry("text", text, ts, {"role": "user"})]

    def _result(self, frame: Mapping[str, Any], ts: str) -> list[dict[str, Any]]:
        total = frame.get("total_cost_usd")
        previous = self.last_total_cost
        cost = 0.0
        if isinstance(total, int | float) and not isinstance(total, bool):
            cost = max(0.0, total - previous) if previous is not None else float(total)
            self.last_total_cost = float(total)
        entries: list[dict[str, Any]] = []
        reason = frame.get("terminal_reason")
        if isinstance(reason, str) and reason in _ABORTED:
            entries.append(_entry("system", INTERRUPTED_TEXT, ts, {"subtype": "interrupted"}))
        elif frame.get("is_error"):
            if not self._turn_error_reported:
                entries.append(_result_error(frame, ts))
        else:
            turns = frame.get("num_turns")
            turns = turns if isinstance(turns, int) and not isinstance(turns, bool) else 0
            model_usage = frame.get("modelUsage")
            metadata: dict[str, Any] = {
                "subtype": "result",
                "duration_ms": frame.get("duration_ms"),
                "num_turns": turns,
                "total_cost_usd": total,
                "cost_usd": round(cost, 6),
                "usage": frame.get("usage"),
                "model_usage": model_usage,
            }
            metadata.update(self._context_meter(model_usage))
            text = f"Session complete — {turns} turn{'s' if turns != 1 else ''}, ${cost:.4f}"
            entries.append(_entry("system", text, ts, _drop_none(metadata)))
        self._turn_error_reported = False
        entries.append(_entry("system", "", ts, {"stream_end": True}))
        return entries

    def _context_meter(self, model_usage: Any) -> dict[str, Any]:
        """``context_window`` / ``context_percentage`` for the heartbeat, from the last call.

        The window is the ``contextWindow`` that ``modelUsage`` gives for the model of the last
        main-thread call; the percentage is that call's tokens over it (rounded, 0-100). The SDK's
        ``get_context_usage()`` computes the same but is slow on its first call, which would hold
        the turn's end back.
        """
        if self._context is None or not isinstance(model_usage, Mapping):
            return {}
        model, tokens = self._context
        usage = model_usage.get(model) if model is not None else None
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

    def _system(self, frame: Mapping[str, Any], ts: str) -> list[dict[str, Any]]:
        subtype = frame.get("subtype")
        if subtype == "init" and not self._init_seen:
            self._init_seen = True
            model = str(frame.get("model") or "unknown model")
            version = str(frame.get("claude_code_version") or "")
            tools = frame.get("tools")
            metadata = {
                "subtype": "init",
                "model": model,
                "version": version or None,
                "tools": tools if isinstance(tools, list) else None,
                "permissionMode": frame.get("permissionMode"),
            }
            text = f"Claude Code {version} ({model})" if version else f"Claude Code ({model})"
            return [_entry("system", text, ts, _drop_none(metadata))]
        if subtype == "compact_boundary":
            return [_entry("system", "Conversation compacted", ts, {"subtype": "compact_boundary"})]
        return []


def _result_error(frame: Mapping[str, Any], ts: str) -> dict[str, Any]:
    """The ``error`` entry of a failed result: its ``errors``, else its text, else its subtype."""
    subtype = frame.get("subtype")
    subtype = subtype if isinstance(subtype, str) and subtype else "error"
    errors = frame.get("errors")
    errors = (
        [e for e in errors if isinstance(e, str) and e.strip()] if isinstance(errors, list) else []
    )
    result = frame.get("result")
    if errors:
        text = "\n".join(errors)
    elif isinstance(result, str) and result.strip():
        text = result.strip()
    else:
        text = subtype
    return _entry("error", text, ts, {"error_type": subtype})


def _mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else an empty one (a missing or malformed field)."""
    return value if isinstance(value, Mapping) else {}


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    """The content blocks of a message: the JSON objects of a list (anything else has none)."""
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, Mapping)]


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _assistant_metadata(model: str | None) -> dict[str, Any]:
    """The metadata every assistant text and thinking entry starts from."""
    if model is None:
        return {"role": "assistant"}  # a frame without its model (the SDK refused those)
    return {"role": "assistant", "model": model}


def _is_text(entry: Mapping[str, Any]) -> bool:
    metadata = entry.get("metadata") or {}
    return bool(entry["entryType"] == "text" and metadata.get("role") == "assistant")


def _with(entry: Mapping[str, Any], **metadata: Any) -> dict[str, Any]:
    return {**entry, "metadata": {**(entry.get("metadata") or {}), **metadata}}


def _drop_none(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if v is not None}


def _entry(
    entry_type: str,
    content: str,
    timestamp: str,
    metadata: dict[str, Any],
    *,
    diff: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An entry; metadata the wire cannot carry (too deep, not JSON) is reduced, never fatal."""
    if not _is_json_object(metadata):
        metadata = {
            k: v
            for k, v in metadata.items()
            if isinstance(v, str | bool) or (isinstance(v, int) and abs(v) < _SAFE_INT)
        }
    return make_entry(entry_type, content, timestamp, metadata, diff)


def _is_json_object(value: dict[str, Any]) -> bool:
    """Whether the wire's ``metadata`` check passes: JSON values only, string keys, at most
    64 levels deep (iterative: hostile nesting must not exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_JSON_DEPTH:
            return False
        if isinstance(node, dict):
            if not all(isinstance(key, str) for key in node):
                return False
            children = node.values()
        else:
            children = node
        for child in children:
            if child is None or isinstance(child, str | bool):
                continue
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif isinstance(child, int):
                if not _INT_MIN <= child <= _INT_MAX:
                    return False
            elif not isinstance(child, float) or not math.isfinite(child):
                return False
    return True
