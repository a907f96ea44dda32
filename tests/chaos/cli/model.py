"""The model of a real-CLI chaos run: a prompt grammar, the reply to each request, and the server.

Why not the directives of :mod:`tests.support.mock_anthropic_script`: that script performs only
the *last* directive of the last user message. Claude Code 2.1.332 folds a prompt that arrives
while a turn runs into that turn (beside the tool result, or merged with a prompt a restart left
unanswered), so under chaos one request often carries several prompts, and all but the last
would silently do nothing: an input the bridge delivered would look lost. This model answers
**every prompt it is shown, each time it is shown** — a prompt delivered twice runs twice, which
is exactly what the chaos run must be able to see.

The grammar (one directive per prompt, every part names its input)::

    [[cc: cc-000042 | reply]]                                 → text "done cc-000042"
    [[cc: cc-000042 | bash: echo cc-000042 >> /w/ledger]]      → a Bash call, then "done cc-000042"
    [[cc: cc-000042 | bash: … | slow: 1.5]]                    → stream 1.5 s first

A real model takes a while before it answers a prompt (its time to first token is a second or
more); the mock answers in milliseconds, which no real session ever sees: Claude Code writes a
prompt into its session file about 0.1 s after it sent the request, so a model that answers
faster than that lets a tool run before the prompt is on disk. The chaos model therefore waits
:data:`DEFAULT_LATENCY` before answering a request that carries a new prompt (``--model-latency``
changes it; 0 reproduces the mock's speed).

The reply to one request (pure: :func:`plan_chaos_reply`) is, in order: ``done <id>`` for each
tool result of the last user message that answers one of our Bash calls (a refusal too — the
model goes on after a denial — but not Claude Code's "[Tool call interrupted: …" for a call that
a dead CLI left open: that turn is over), then for each prompt of the last user message its
``done`` text (``reply``) or its Bash call; the longest ``slow`` of those prompts delays the
reply. A request with nothing of ours gets ``ok``.

:class:`ChaosMock` is :class:`~tests.support.mock_anthropic.MockAnthropic` with this planner, and
it keeps a light record of each request (:class:`ModelCall`: when, which prompts, which results)
instead of the bodies (a Claude Code request carries ~50 KB of system prompt and tools; a long
run makes thousands).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.support import mock_anthropic as base
from tests.support.mock_anthropic_script import Block, Reply, parse_directives

__all__ = [
    "DIRECTIVE",
    "INTERRUPTED_RESULT",
    "ChaosMock",
    "ModelCall",
    "Prompt",
    "done_text",
    "input_ids_in",
    "parse_done",
    "parse_prompts",
    "plan_chaos_reply",
    "prompt_text",
    "summarize",
]

DIRECTIVE = "cc"
INPUT_ID = re.compile(r"\bcc-\d{6}\b")
_DONE = re.compile(r"^done (cc-\d{6})$")
DEFAULT_LATENCY = 0.4
"""Seconds the chaos model waits before it answers a new prompt (see the module docstring)."""
INTERRUPTED_RESULT = "Tool call interrupted"
"""What Claude Code puts in the result of a call a dead CLI left open, when it resumes."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt of the grammar."""

    input_id: str
    command: str | None = None
    """The Bash command to run (None: a plain reply)."""
    slow: float = 0.0


def prompt_text(prompt: Prompt) -> str:
    """The text the phone sends for `prompt`."""
    parts = [prompt.input_id, "reply" if prompt.command is None else f"bash: {prompt.command}"]
    if prompt.slow:
        parts.append(f"slow: {prompt.slow:g}")
    return f"[[{DIRECTIVE}: {' | '.join(parts)}]]"


def done_text(input_id: str) -> str:
    """What the model says when the turn of `input_id` is done."""
    return f"done {input_id}"


def parse_done(text: str) -> str | None:
    """The input id of a ``done`` text, or None."""
    match = _DONE.match(text)
    return match.group(1) if match else None


def input_ids_in(text: str) -> list[str]:
    return INPUT_ID.findall(text)


def parse_prompts(text: str) -> list[Prompt]:
    """Every prompt of the grammar in `text`, in order (other directives are ignored)."""
    prompts: list[Prompt] = []
    for name, args in parse_directives(text):
        if name != DIRECTIVE or not args or not INPUT_ID.fullmatch(args[0]):
            continue
        command: str | None = None
        slow = 0.0
        for arg in args[1:]:
            key, _, value = arg.partition(":")
            if key.strip() == "bash":
                command = value.strip()
            elif key.strip() == "slow":
                try:
                    slow = min(max(float(value), 0.0), 30.0)
                except ValueError:
                    slow = 0.0
        prompts.append(Prompt(args[0], command, slow))
    return prompts


# --- requests ------------------------------------------------------------------------------------


def _messages(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = body.get("messages")
    return [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else []


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(str(i.get("text", "")) for i in content if isinstance(i, Mapping))
    return str(content or "")


def _calls(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """tool_use id → the input id its Bash command names, over the whole conversation."""
    calls: dict[str, str] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for block in _blocks(message):
            tool_input = block.get("input")
            if block.get("type") != "tool_use" or not isinstance(tool_input, Mapping):
                continue
            ids = input_ids_in(str(tool_input.get("command", "")))
            if ids:
                calls[str(block.get("id"))] = ids[0]
    return calls


def _last_user(messages: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((m for m in reversed(messages) if m.get("role") == "user"), None)


@dataclass(slots=True)
class ModelCall:
    """What one request showed the model (the light record :class:`ChaosMock` keeps)."""

    at: float
    """``time.monotonic()`` when it arrived."""
    prompts: tuple[str, ...]
    """Input ids of the prompts in its last user message."""
    results: tuple[str, ...]
    """Input ids whose Bash results are in its last user message."""
    interrupted: tuple[str, ...]
    """Of those, the ones Claude Code marked interrupted (a call a dead CLI left open)."""
    replied_at: float | None = None
    """``time.monotonic()`` once the whole reply was written (None: not yet, or never)."""


def summarize(body: Mapping[str, Any], at: float) -> ModelCall:
    """The :class:`ModelCall` of a request body."""
    messages = _messages(body)
    last = _last_user(messages)
    if last is None:
        return ModelCall(at, (), (), ())
    calls = _calls(messages)
    prompts: list[str] = []
    results: list[str] = []
    interrupted: list[str] = []
    for block in _blocks(last):
        if block.get("type") == "text":
            prompts += [p.input_id for p in parse_prompts(str(block.get("text", "")))]
        elif block.get("type") == "tool_result":
            input_id = calls.get(str(block.get("tool_use_id")))
            if input_id is not None:
                results.append(input_id)
                if INTERRUPTED_RESULT in _result_text(block):
                    interrupted.append(input_id)
    return ModelCall(at, tuple(prompts), tuple(results), tuple(interrupted))


def plan_chaos_reply(body: Mapping[str, Any], latency: float = 0.0) -> Reply:
    """The model's answer to one request (see the module docstring); a request with a new
    prompt waits at least `latency` seconds."""
    messages = _messages(body)
    last = _last_user(messages)
    if last is None:
        return Reply(blocks=(Block("text", text="ok"),))
    calls = _calls(messages)
    texts: list[Block] = []
    tools: list[Block] = []
    delay = 0.0
    for block in _blocks(last):
        if block.get("type") == "tool_result":
            input_id = calls.get(str(block.get("tool_use_id")))
            if input_id is not None and INTERRUPTED_RESULT not in _result_text(block):
                texts.append(Block("text", text=done_text(input_id)))
        elif block.get("type") == "text":
            for prompt in parse_prompts(str(block.get("text", ""))):
                delay = max(delay, prompt.slow, latency)
                if prompt.command is None:
                    texts.append(Block("text", text=done_text(prompt.input_id)))
                else:
                    tool_input = {
                        "command": prompt.command,
                        "description": f"chaos {prompt.input_id}",
                    }
                    tool_id = f"toolu_{uuid.uuid4().hex[:24]}"
                    tools.append(Block("tool_use", name="Bash", input=tool_input, id=tool_id))
    if not texts and not tools:
        texts.append(Block("text", text="ok"))
    return Reply(blocks=(*texts, *tools), delay=delay)


# --- the server ----------------------------------------------------------------------------------


class _ChaosHandler(base._Handler):
    """The mock's handler with :func:`plan_chaos_reply` as the model (everything else as is)."""

    def do_POST(self) -> None:
        body = self._read_body()
        path = self._record(body)
        if path == "/v1/messages/count_tokens":
            self._send_json(200, {"input_tokens": base._input_tokens(body)})
            return
        if path != "/v1/messages" or not isinstance(body, dict):
            self._send_json(404, base._error_body("not_found_error", f"no route {self.path}"))
            return
        mock = self.server.mock
        assert isinstance(mock, ChaosMock)
        reply = plan_chaos_reply(body, mock.latency)
        model = str(body.get("model") or "claude-mock")
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        tokens = base._input_tokens(body)
        try:
            if body.get("stream") is True:
                self._stream(reply, model, message_id, tokens)
            else:
                self._send_json(200, base._message_json(reply, model, message_id, tokens))
        finally:
            mock.replied(body)


class ChaosMock(base.MockAnthropic):
    """The mock Anthropic API with the chaos model (see the module docstring)."""

    def __init__(self, latency: float = DEFAULT_LATENCY) -> None:
        super().__init__()
        self.latency = latency
        self._server.RequestHandlerClass = _ChaosHandler
        self._calls: list[ModelCall] = []
        self._by_body: dict[int, ModelCall] = {}
        self._calls_lock = threading.Lock()

    def _record(self, request: base.RecordedRequest) -> None:
        # Keep a summary, not the body (see the module docstring).
        if request.method == "POST" and request.path.rstrip("/") == "/v1/messages":
            body = request.body if isinstance(request.body, Mapping) else {}
            call = summarize(body, time.monotonic())
            with self._calls_lock:
                self._calls.append(call)
                self._by_body[id(request.body)] = call

    def replied(self, body: object) -> None:
        """The reply to `body` was written (called by the handler)."""
        with self._calls_lock:
            call = self._by_body.pop(id(body), None)
        if call is not None:
            call.replied_at = time.monotonic()

    def calls(self, after: int = 0) -> list[ModelCall]:
        """The requests from index `after` on."""
        with self._calls_lock:
            return self._calls[after:]

    @property
    def call_count(self) -> int:
        with self._calls_lock:
            return len(self._calls)
