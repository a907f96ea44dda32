"""What an ACP session offers (models, modes) and what its replayed history says it received.

Pure helpers of :mod:`.driver`:

- :class:`SessionOptions` reads ``session/new`` / ``session/load`` responses and
  ``config_option_update`` notifications. Models and modes come as *config options* (the current
  way: a ``select`` with ``category`` ``model`` / ``mode``) or, from older agents, as ``modes``
  (``availableModes`` / ``currentModeId``); both are read.
- :func:`user_messages` and :func:`matched_inputs` answer "which logged inputs did an earlier
  agent take?" from the history ``session/load`` replays: every user message of the conversation
  came from the bridge, in the order of the input log, so the replayed user messages are matched
  to the log's records by text, in order. When one does not match (an agent that rewrites what it
  stores), the match falls back to position: the first *n* inputs of the log for *n* messages.
  An agent may also replay context it added to the conversation itself as a user message (Gemini
  CLI's ``<session_context>`` block: the machine, the date, the workspace tree); such a block is
  not a message of ours and is skipped, as the agent's own interface skips it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.agents.input_log import LoggedInput
from bridge.records import record

__all__ = ["AGENT_CONTEXT_MARKS", "Replayed", "SessionOptions", "matched_inputs", "user_messages"]

#: How a user message the agent wrote itself starts (Gemini CLI 0.61 hides the same two in its
#: own history view).
AGENT_CONTEXT_MARKS = ("<session_context>", "<hook_context>")


@record
class Replayed:
    """One update of a replay, reduced to what counting needs."""

    user: bool
    message_id: str | None = None
    text: str = ""


@dataclass(slots=True)
class SessionOptions:
    """The session's models and modes as the agent offers them."""

    can_load: bool = False
    models: list[tuple[str, str | None]] = field(default_factory=list)
    model: str | None = None
    model_config_id: str | None = None
    modes: list[str] = field(default_factory=list)
    mode_config_id: str | None = None
    current_mode: str | None = None
    initial_mode: str | None = None

    def read_session(self, response: Mapping[str, Any]) -> None:
        """Fold in a ``session/new`` or ``session/load`` response (JSON)."""
        modes = response.get("modes")
        if isinstance(modes, Mapping):
            available = modes.get("availableModes")
            if isinstance(available, list):
                self.modes = [
                    m["id"]
                    for m in available
                    if isinstance(m, Mapping) and isinstance(m.get("id"), str)
                ]
            current = modes.get("currentModeId")
            if isinstance(current, str):
                self.current_mode = current
        self.read_config(response.get("configOptions"))
        if self.initial_mode is None:
            self.initial_mode = self.current_mode

    def read_config(self, options: Any) -> None:
        """Fold in a list of config options (a response's, or a ``config_option_update``)."""
        if not isinstance(options, list):
            return
        for option in options:
            if not isinstance(option, Mapping) or option.get("type", "select") != "select":
                continue
            option_id, category = option.get("id"), option.get("category")
            if not isinstance(option_id, str):
                continue
            values = _values(option.get("options"))
            current = option.get("currentValue")
            current = current if isinstance(current, str) else None
            if category == "model" or (category is None and option_id == "model"):
                self.model_config_id = option_id
                self.models = values
                self.model = current
            elif category == "mode" or (category is None and option_id == "mode"):
                self.mode_config_id = option_id
                self.modes = [value for value, _ in values]
                self.current_mode = current


def _values(options: Any) -> list[tuple[str, str | None]]:
    """A select's values with their names; grouped options are flattened."""
    values: list[tuple[str, str | None]] = []
    if not isinstance(options, list):
        return values
    for item in options:
        if not isinstance(item, Mapping):
            continue
        if isinstance(value := item.get("value"), str):
            name = item.get("name")
            values.append((value, name if isinstance(name, str) else None))
        elif isinstance(item.get("options"), list):  # a group
            values += _values(item["options"])
    return values


def user_messages(replayed: Sequence[Replayed]) -> list[str]:
    """The user messages of a replay, in order: consecutive user chunks joined, a new message
    at every other update between them or at a new ``messageId``. A block of the agent's own
    context (:data:`AGENT_CONTEXT_MARKS`) is left out and ends the message before it."""
    messages: list[str] = []
    open_id: str | None = None
    joining = False
    for item in replayed:
        if not item.user or item.text.lstrip().startswith(AGENT_CONTEXT_MARKS):
            joining = False
            continue
        if joining and (item.message_id is None or item.message_id == open_id):
            messages[-1] += item.text
        else:
            messages.append(item.text)
        joining, open_id = True, item.message_id
    return messages


def matched_inputs(logged: Sequence[LoggedInput], messages: Sequence[str]) -> set[str]:
    """The uids of the `logged` inputs the replayed user `messages` show were received."""
    unique: list[LoggedInput] = []
    seen: set[str] = set()
    for item in logged:
        if item.uid not in seen:
            seen.add(item.uid)
            unique.append(item)
    matched: set[str] = set()
    position = 0
    for message in messages:
        wanted = message.strip()
        while position < len(unique) and unique[position].text.strip() != wanted:
            position += 1
        if position == len(unique):
            return {record.uid for record in unique[: len(messages)]}
        matched.add(unique[position].uid)
        position += 1
    return matched
