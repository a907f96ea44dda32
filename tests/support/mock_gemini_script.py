"""What the mock Gemini API answers: the directive script of the Anthropic mock, spoken in Gemini.

Pure (no I/O). Rather than a second directive language, a Gemini request is translated into the
Anthropic Messages shape, answered by :func:`tests.support.mock_anthropic_script.plan_reply`, and
the reply translated back into Gemini ``parts``. So ``[[reply: …]]``, ``[[bash: …]]``,
``[[write: p | c]]``, ``[[edit: p | old | new]]``, ``[[read: p]]``, ``[[after: …]]``,
``[[fail: …]]`` and ``[[slow: …]]`` mean for Gemini CLI what they mean for Claude Code and
OpenCode, and the tool names follow what the request's ``functionDeclarations`` offer
(:mod:`tests.support.tool_dialects`: ``run_shell_command``, ``write_file``, ``replace``,
``read_file``).

============================  =================================================================
Gemini request                Anthropic equivalent
============================  =================================================================
``contents[].role`` user      ``user``; ``model`` → ``assistant``
``{text}`` part               a ``text`` block (``thought: true`` parts are dropped)
``{functionCall}`` part       a ``tool_use`` block (id: the call's ``id``, else its name)
``{functionResponse}`` part   a ``tool_result`` block (``response.output`` / ``error`` → text)
``tools[].functionDecl…``     ``tools`` (name + properties, for the dialect)
============================  =================================================================

Gemini CLI also asks the model side questions with ``generateContent`` and a JSON response schema
(``generationConfig.responseJsonSchema``; e.g. the next-speaker check, when enabled, or the model
router's classifier). Those get :func:`json_answer`: an object that satisfies the schema, with
the known questions answered so that the turn ends normally (``next_speaker: "user"``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .mock_anthropic_script import Reply, plan_reply

__all__ = ["json_answer", "json_schema", "plan_gemini_reply", "reply_parts", "to_anthropic"]

_KNOWN_ANSWERS: dict[str, Any] = {
    # The next-speaker check: "user" ends the turn (the model is not expected to go on).
    "next_speaker": "user",
    "reasoning": "mock",
    # The model router's classifier (0.61: "Complexity score from 1-100", checked >= 1 by zod).
    "complexity_score": 1,
    "complexity_reasoning": "mock",
}


def _part_blocks(part: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if isinstance(part.get("text"), str) and not part.get("thought"):
        yield {"type": "text", "text": part["text"]}
    call = part.get("functionCall")
    if isinstance(call, dict):
        yield {
            "type": "tool_use",
            "id": str(call.get("id") or call.get("name") or ""),
            "name": str(call.get("name") or ""),
            "input": call.get("args") if isinstance(call.get("args"), dict) else {},
        }
    response = part.get("functionResponse")
    if isinstance(response, dict):
        yield {
            "type": "tool_result",
            "tool_use_id": str(response.get("id") or response.get("name") or ""),
            "content": _response_text(response.get("response")),
            "is_error": isinstance(response.get("response"), dict)
            and "error" in response["response"],
        }


def _response_text(response: Any) -> str:
    if isinstance(response, dict):
        for key in ("output", "error", "content"):
            if key in response:
                value = response[key]
                return value if isinstance(value, str) else json.dumps(value)
    return json.dumps(response)


def to_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    """A Gemini ``generateContent`` body as an Anthropic Messages body (see the table above)."""
    messages: list[dict[str, Any]] = []
    contents = body.get("contents")
    for content in contents if isinstance(contents, list) else []:
        if not isinstance(content, dict):
            continue
        parts = content.get("parts")
        blocks = [
            block
            for part in (parts if isinstance(parts, list) else [])
            if isinstance(part, dict)
            for block in _part_blocks(part)
        ]
        role = "assistant" if content.get("role") == "model" else "user"
        messages.append({"role": role, "content": blocks})
    return {"messages": messages, "tools": body.get("tools") or []}


def plan_gemini_reply(body: dict[str, Any]) -> Reply:
    """The scripted answer to a Gemini request body (tool names in Gemini CLI's dialect)."""
    return plan_reply(to_anthropic(body))


def reply_parts(reply: Reply) -> list[dict[str, Any]]:
    """The Gemini ``parts`` of a :class:`Reply`: text, ``thought`` text, ``functionCall``."""
    parts: list[dict[str, Any]] = []
    for block in reply.blocks:
        if block.type == "text":
            parts.append({"text": block.text})
        elif block.type == "thinking":
            parts.append({"text": block.text, "thought": True})
        else:
            parts.append(
                {"functionCall": {"id": block.id, "name": block.name, "args": block.input}}
            )
    return parts


def json_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a ``generateContent`` request asks the answer to follow, if any."""
    config = body.get("generationConfig")
    if not isinstance(config, dict) or config.get("responseMimeType") != "application/json":
        return None
    schema = config.get("responseJsonSchema", config.get("responseSchema"))
    return schema if isinstance(schema, dict) else {}


def json_answer(schema: dict[str, Any]) -> Any:
    """A value satisfying `schema` (types, enums, required fields), known fields answered."""
    kind = str(schema.get("type", "object")).lower()
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    if kind == "object":
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        answer: dict[str, Any] = {}
        for name, sub in props.items():
            if name in _KNOWN_ANSWERS:
                answer[name] = _KNOWN_ANSWERS[name]
            elif isinstance(sub, dict):
                answer[name] = json_answer(sub)
        return answer
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "mock"
