"""What the mock Anthropic API answers: directives in the prompt → one scripted assistant message.

Pure (no I/O): :func:`plan_reply` takes the decoded body of a ``POST /v1/messages`` and returns a
:class:`Reply` that :mod:`tests.support.mock_anthropic` renders as SSE or JSON.

Directives are written in the user's prompt as ``[[name: arguments]]`` (arguments split on
``|``). The script of a request is every directive of the **last text block that holds one** in
the last user message; Claude Code merges consecutive user turns (after an API error or an
interrupt), keeping each prompt as its own text block, so the last prompt wins.

=================================  ==============================================================
``[[reply: text]]``                a text block (several concatenate, in order)
``[[say: text]]``                  the same; reads better before a tool call
``[[think: text]]``                a thinking block (``[[think]]``: empty, like a redacted one)
``[[bash: command]]``              a ``Bash`` tool call (``bash`` for OpenCode, see below)
``[[write: path | content]]``      a ``Write`` tool call (a literal ``\\n`` makes a newline)
``[[edit: path | old | new]]``     an ``Edit`` tool call
``[[read: path]]``                 a ``Read`` tool call
``[[exit_plan: plan text]]``       the plan file written, then an ``ExitPlanMode`` call
``[[enter_plan]]``                 an ``EnterPlanMode`` call (loaded the same way)
``[[ask: question | opt | opt]]``  an ``AskUserQuestion``; several ``ask`` → one call, N questions
``[[tool: Name | {json input}]]``  any other tool call
``[[after: text]]``                the final text once the tools answered (default: ``Done: …``)
``[[fail: 500 | message]]``        an HTTP error of that status (an ``error`` JSON body)
``[[slow: 5]]``                    stream the first event, then wait that many seconds
=================================  ==============================================================

Several tool directives in one prompt make one message with parallel tool calls. When the last
user message carries tool results and no new directive, the tools answered: the reply is the
``after`` text of the prompt that asked for them, or ``Done: <result>``. A prompt with no
directive at all gets ``echo: <prompt>``.

Tool calls take the name and fields of the agent that asked, recognised by the tools its request
offers (:mod:`tests.support.tool_dialects`): OpenCode gets ``bash{command}``,
``write{filePath, content}``, ``edit{filePath, oldString, newString}``, ``read{filePath}``;
Gemini CLI (through :mod:`tests.support.mock_gemini`) ``run_shell_command``, ``write_file``,
``replace``, ``read_file``. A request offering Claude Code's names, or no tools, is unchanged.

Preparatory calls, as a real model makes them (their ids start with ``toolu_prep``; when they
answer, the mock performs the prompt's script again):

- Deferred tools (``ExitPlanMode``, ``EnterPlanMode`` here) must be fetched with ``ToolSearch``
  before Claude Code accepts a call to them: ``ToolSearch select:<name>`` first when the
  conversation has not loaded them yet.
- ``ExitPlanMode`` takes no plan: Claude Code reads it from the plan file its plan-mode reminder
  names (``…/plans/<slug>.md``). ``exit_plan`` therefore first ``Write``s the plan text there
  (once per prompt), when the conversation names such a file.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from .tool_dialects import adapt_tool_call, offered_tools

__all__ = [
    "DEFERRED_TOOLS",
    "Block",
    "Reply",
    "last_user_prompt",
    "parse_directives",
    "plan_reply",
]

DEFERRED_TOOLS = frozenset({"ExitPlanMode", "EnterPlanMode"})
"""Tools Claude Code lists as deferred: a call needs a ``ToolSearch`` that loaded them first."""

_DIRECTIVE = re.compile(r"\[\[\s*([a-z_]+)\s*(?::(.*?))?\]\]", re.DOTALL)
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_MAX_SLOW = 60.0
_PREP = "toolu_prep"
_PLAN_FILE = re.compile(r"(/[^\s`'\"]*/plans/[^\s`'\"/]+\.md)")
_RESULT_EXCERPT = 300


@dataclass(frozen=True, slots=True)
class Block:
    """One content block of the scripted assistant message."""

    type: str  # "text" | "thinking" | "tool_use"
    text: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    id: str = ""


@dataclass(frozen=True, slots=True)
class Reply:
    """The mock's answer to one request."""

    blocks: tuple[Block, ...] = ()
    status: int = 200
    error_type: str = ""
    error_message: str = ""
    delay: float = 0.0

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(b.type == "tool_use" for b in self.blocks) else "end_turn"


def parse_directives(text: str) -> list[tuple[str, list[str]]]:
    """``[[name: a | b]]`` occurrences of `text` as ``(name, [a, b])``, in order."""
    found: list[tuple[str, list[str]]] = []
    for match in _DIRECTIVE.finditer(text):
        raw = match.group(2)
        args = [] if raw is None else [part.strip() for part in raw.split("|")]
        found.append((match.group(1), args))
    return found


def _text_blocks(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]


def _tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _script_text(message: dict[str, Any]) -> str | None:
    """The last text block of `message` that holds a directive."""
    for text in reversed(_text_blocks(message)):
        if parse_directives(text):
            return text
    return None


def last_user_prompt(body: dict[str, Any]) -> str:
    """The last text block of the last user message (the prompt, after the system reminders)."""
    for message in reversed(_messages(body)):
        if message.get("role") == "user":
            texts = _text_blocks(message)
            return texts[-1] if texts else ""
    return ""


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def plan_reply(body: dict[str, Any]) -> Reply:
    """The scripted answer to a request body (see the module docstring).

    Tool calls come out in the dialect of the agent that sent `body`, recognised by the tools it
    offers (:func:`tests.support.tool_dialects.adapt_tool_call`): ``[[bash: …]]`` is ``Bash`` for
    Claude Code, ``bash`` for OpenCode, ``run_shell_command`` for Gemini CLI.
    """
    reply = _plan(body)
    offered = offered_tools(body)
    if not offered or not any(b.type == "tool_use" for b in reply.blocks):
        return reply
    return replace(reply, blocks=tuple(_adapted(b, offered) for b in reply.blocks))


def _adapted(block: Block, offered: dict[str, frozenset[str] | None]) -> Block:
    if block.type != "tool_use":
        return block
    name, tool_input = adapt_tool_call(block.name, block.input, offered)
    return replace(block, name=name, input=tool_input)


def _plan(body: dict[str, Any]) -> Reply:
    messages = _messages(body)
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        return Reply(blocks=(Block("text", text="echo: "),))
    last = users[-1]
    script = _script_text(last)
    if script is not None:
        return _perform(parse_directives(script), messages)
    results = _tool_results(last)
    if results:
        original = next(
            (text for text in map(_script_text, reversed(users[:-1])) if text is not None), None
        )
        directives = parse_directives(original) if original is not None else []
        if directives and all(str(r.get("tool_use_id", "")).startswith(_PREP) for r in results):
            # Our own preparatory calls answered: now make the calls they prepared.
            return _perform(directives, messages)
        return _after_tools(results, directives)
    return Reply(blocks=(Block("text", text=f"echo: {last_user_prompt(body)}"),))


def _after_tools(results: list[dict[str, Any]], directives: list[tuple[str, list[str]]]) -> Reply:
    """The final text once the tool calls of the previous turn were answered."""
    after = [" | ".join(args) for name, args in directives if name == "after"]
    if after:
        return Reply(blocks=(Block("text", text="\n".join(after)),))
    parts = [_result_text(result) for result in results]
    return Reply(blocks=(Block("text", text="Done: " + " / ".join(parts)),))


def _result_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, list):
        content = " ".join(str(item.get("text", "")) for item in content if isinstance(item, dict))
    text = str(content or "")
    if result.get("is_error"):
        text = f"error: {text}"
    return text[:_RESULT_EXCERPT]


def _loaded_tools(messages: list[dict[str, Any]]) -> set[str]:
    """Deferred tools a ``ToolSearch`` of the conversation has already loaded.

    Claude Code 2.1.332 answers ``ToolSearch`` with ``tool_reference`` blocks; a plain-text answer
    to one of our preparatory calls that names the tool counts too (older CLIs).
    """
    loaded: set[str] = set()
    for message in messages:
        for result in _tool_results(message):
            inner = result.get("content")
            if isinstance(inner, list):
                loaded.update(
                    str(item.get("tool_name"))
                    for item in inner
                    if isinstance(item, dict) and item.get("type") == "tool_reference"
                )
            if str(result.get("tool_use_id", "")).startswith(_PREP):
                text = _result_text(result)
                loaded.update(name for name in DEFERRED_TOOLS if name in text)
    return loaded


def _tool(name: str, tool_input: dict[str, Any], *, prep: bool = False) -> Block:
    prefix = _PREP if prep else "toolu"
    return Block("tool_use", name=name, input=tool_input, id=f"{prefix}_{uuid.uuid4().hex[:24]}")


def _all_text(messages: list[dict[str, Any]]) -> Iterator[str]:
    for message in messages:
        yield from _text_blocks(message)
        for result in _tool_results(message):
            yield _result_text({"content": result.get("content")})


def _plan_file(messages: list[dict[str, Any]]) -> str | None:
    """The plan file the latest plan-mode reminder of the conversation names, if any."""
    found: str | None = None
    for text in _all_text(messages):
        for match in _PLAN_FILE.finditer(text):
            found = match.group(1)
    return found


def _prep_calls_since_prompt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The preparatory tool calls made since the last prompt with a directive."""
    calls: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") == "user" and _script_text(message) is not None:
            break
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            calls.extend(
                b
                for b in content
                if isinstance(b, dict)
                and b.get("type") == "tool_use"
                and str(b.get("id", "")).startswith(_PREP)
            )
    return calls


def _perform(directives: list[tuple[str, list[str]]], messages: list[dict[str, Any]]) -> Reply:
    blocks: list[Block] = []
    tools: list[Block] = []
    questions: list[dict[str, Any]] = []
    delay = 0.0
    for name, args in directives:
        first = args[0] if args else ""
        match name:
            case "reply" | "say":
                blocks.append(Block("text", text=" | ".join(args)))
            case "think":
                blocks.append(Block("thinking", text=" | ".join(args)))
            case "bash":
                tools.append(_tool("Bash", {"command": first, "description": "Run a command"}))
            case "write":
                content = " | ".join(args[1:])  # the content may itself hold a `|`
                tools.append(
                    _tool("Write", {"file_path": first, "content": content.replace("\\n", "\n")})
                )
            case "edit":
                old = args[1] if len(args) > 1 else ""
                new = args[2] if len(args) > 2 else ""
                tools.append(
                    _tool("Edit", {"file_path": first, "old_string": old, "new_string": new})
                )
            case "read":
                tools.append(_tool("Read", {"file_path": first}))
            case "exit_plan":
                tools.append(_tool("ExitPlanMode", {"plan": " | ".join(args)}))
            case "enter_plan":
                tools.append(_tool("EnterPlanMode", {}))
            case "ask":
                options = args[1:] or ["Yes", "No"]
                questions.append(
                    {
                        "question": first,
                        "header": (first[:12] or "Question"),
                        "options": [{"label": o, "description": f"Choose {o}"} for o in options],
                        "multiSelect": False,
                    }
                )
            case "tool":
                try:
                    parsed = json.loads(" | ".join(args[1:]) or "{}")
                except ValueError:
                    parsed = {}
                tools.append(_tool(first, parsed if isinstance(parsed, dict) else {}))
            case "fail":
                status = int(first) if first.isdigit() else 500
                message = args[1] if len(args) > 1 else f"mock failure {status}"
                return Reply(
                    status=status,
                    error_type=_ERROR_TYPES.get(status, "api_error"),
                    error_message=message,
                )
            case "slow":
                try:
                    delay = min(max(float(first), 0.0), _MAX_SLOW)
                except ValueError:
                    delay = 1.0
            case _:  # `after` and unknown names are not part of this message
                pass
    if questions:
        tools.append(_tool("AskUserQuestion", {"questions": questions}))
    prep = _preparation(tools, messages)
    if prep:
        return Reply(blocks=tuple(prep))
    if not blocks and not tools:
        blocks.append(Block("text", text="waited" if delay else "ok"))
    return Reply(blocks=(*blocks, *tools), delay=delay)


def _preparation(tools: list[Block], messages: list[dict[str, Any]]) -> list[Block]:
    """The preparatory calls `tools` still need (see the module docstring), or none."""
    prep: list[Block] = []
    done = _prep_calls_since_prompt(messages)
    plan_file = _plan_file(messages)
    for tool in tools:
        if tool.name != "ExitPlanMode" or plan_file is None:
            continue
        if not any(c.get("name") == "Write" for c in done):
            content = str(tool.input.get("plan", "")) or "(empty plan)"
            prep.append(_tool("Write", {"file_path": plan_file, "content": content}, prep=True))
    if prep:
        return prep
    missing = sorted({t.name for t in tools if t.name in DEFERRED_TOOLS} - _loaded_tools(messages))
    if missing:
        prep.append(_tool("ToolSearch", {"query": "select:" + ",".join(missing)}, prep=True))
    return prep
