"""The mock Gemini API: its script (pure) and its HTTP answers (over a real socket)."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_anthropic_script import Block, Reply
from tests.support.mock_gemini import MockGemini, gemini_env
from tests.support.mock_gemini_script import (
    json_answer,
    json_schema,
    plan_gemini_reply,
    reply_parts,
    to_anthropic,
)

TOOLS = [
    {
        "functionDeclarations": [
            {"name": "run_shell_command", "parametersJsonSchema": {"properties": {"command": {}}}},
            {"name": "write_file", "parametersJsonSchema": {"properties": {"file_path": {}}}},
        ]
    }
]


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


def body(*contents: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"contents": list(contents), "tools": TOOLS, **extra}


CALL = {"functionCall": {"id": "c1", "name": "run_shell_command", "args": {"command": "ls"}}}
RESULT = {
    "functionResponse": {"id": "c1", "name": "run_shell_command", "response": {"output": "a"}}
}


def test_to_anthropic_maps_roles_and_parts() -> None:
    converted = to_anthropic(
        body(
            user({"text": "<session_context>…</session_context>"}, {"text": "go"}),
            model({"text": "hmm", "thought": True}, CALL),
            user(RESULT),
            user({"functionResponse": {"name": "x", "response": {"error": "no"}}}),
        )
    )
    assert converted["tools"] == TOOLS
    assert converted["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<session_context>…</session_context>"},
                {"type": "text", "text": "go"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "c1",
                    "name": "run_shell_command",
                    "input": {"command": "ls"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "a", "is_error": False}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "x", "content": "no", "is_error": True}
            ],
        },
    ]


PLAN_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = [
    ("echo", body(user({"text": "ctx"}, {"text": "hello"})), [{"text": "echo: hello"}]),
    (
        "shell-in-gemini-dialect",
        body(user({"text": "[[say: ok]] [[bash: ls]]"})),
        [
            {"text": "ok"},
            {"functionCall": {"id": "ID", "name": "run_shell_command", "args": {"command": "ls"}}},
        ],
    ),
    (
        "after-the-function-response",
        body(user({"text": "[[bash: ls]] [[after: listed]]"}), model(CALL), user(RESULT)),
        [{"text": "listed"}],
    ),
    (
        "default-after-text",
        body(user({"text": "[[bash: ls]]"}), model(CALL), user(RESULT)),
        [{"text": "Done: a"}],
    ),
    (
        "think",
        body(user({"text": "[[think: hm]] [[reply: x]]"})),
        [{"text": "hm", "thought": True}, {"text": "x"}],
    ),
]


@pytest.mark.parametrize(
    ("request_body", "expected"),
    [case[1:] for case in PLAN_CASES],
    ids=[case[0] for case in PLAN_CASES],
)
def test_plan_gemini_reply(request_body: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    parts = reply_parts(plan_gemini_reply(request_body))
    for part in parts:  # call ids are random
        if "functionCall" in part:
            assert part["functionCall"].pop("id").startswith("toolu_")
            part["functionCall"]["id"] = "ID"
            part["functionCall"] = {k: part["functionCall"][k] for k in ("id", "name", "args")}
    assert parts == expected


def test_reply_parts_of_a_tool_block() -> None:
    reply = Reply(blocks=(Block("tool_use", name="write_file", input={"a": 1}, id="t1"),))
    assert reply_parts(reply) == [
        {"functionCall": {"id": "t1", "name": "write_file", "args": {"a": 1}}}
    ]


def test_json_answers_satisfy_the_schemas_gemini_cli_sends() -> None:
    classifier = {
        "type": "OBJECT",
        "properties": {
            "complexity_reasoning": {"type": "STRING"},
            "complexity_score": {"type": "INTEGER", "description": "Complexity score from 1-100."},
        },
    }
    next_speaker = {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "next_speaker": {"type": "string", "enum": ["user", "model"]},
        },
    }
    assert json_answer(classifier) == {"complexity_reasoning": "mock", "complexity_score": 1}
    assert json_answer(next_speaker) == {"reasoning": "mock", "next_speaker": "user"}
    other = {
        "type": "object",
        "properties": {
            "n": {"type": "number", "minimum": 3},
            "b": {"type": "boolean"},
            "l": {"type": "array"},
            "e": {"enum": ["x", "y"]},
            "o": {"type": "object", "properties": {"s": {"type": "string"}}},
        },
    }
    assert json_answer(other) == {"n": 3, "b": False, "l": [], "e": "x", "o": {"s": "mock"}}


def test_json_schema_only_when_json_is_asked() -> None:
    schema = {"type": "OBJECT"}
    asked = {
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema}
    }
    assert json_schema(asked) == schema
    assert json_schema({"generationConfig": {"responseMimeType": "application/json"}}) == {}
    assert json_schema({"generationConfig": {"temperature": 1}}) is None
    assert json_schema({}) is None


def test_gemini_env_is_complete_and_isolated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "leak")
    env = gemini_env("http://127.0.0.1:9/", tmp_path)
    assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9"
    assert env["HOME"] == str(tmp_path / "home")
    assert "GOOGLE_API_KEY" not in env
    settings = json.loads((tmp_path / "home" / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["privacy"]["usageStatisticsEnabled"] is False


# -- over a real socket -------------------------------------------------------------------------


@pytest.fixture
def mock() -> Any:
    with MockGemini() as server:
        yield server


def post(mock: MockGemini, path: str, payload: Any) -> tuple[int, str, bytes]:
    host, port = mock.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", path, json.dumps(payload), {"content-type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, response.getheader("content-type") or "", data


def sse_chunks(data: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data: "))
        for line in data.decode().split("\r\n\r\n")
        if line.strip().startswith("data: ")
    ]


def test_stream_generate_content(mock: MockGemini) -> None:
    payload = body(user({"text": "[[say: hi]] [[bash: ls]]"}))
    status, ctype, data = post(
        mock, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", payload
    )
    assert (status, ctype) == (200, "text/event-stream")
    first, last = sse_chunks(data)
    assert first["candidates"][0]["content"] == {"role": "model", "parts": [{"text": "hi"}]}
    assert "finishReason" not in first["candidates"][0]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert (
        last["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "run_shell_command"
    )
    assert set(last["usageMetadata"]) == {
        "promptTokenCount",
        "candidatesTokenCount",
        "totalTokenCount",
    }
    (recorded,) = mock.generate_requests()
    assert recorded.query == "alt=sse"


def test_generate_content_count_tokens_json_and_errors(mock: MockGemini) -> None:
    status, _, data = post(mock, "/v1beta/models/m:generateContent", body(user({"text": "x"})))
    assert status == 200
    assert json.loads(data)["candidates"][0]["content"]["parts"] == [{"text": "echo: x"}]

    config = {
        "responseMimeType": "application/json",
        "responseJsonSchema": {
            "type": "OBJECT",
            "properties": {"next_speaker": {"type": "STRING"}},
        },
    }
    status, _, data = post(
        mock, "/v1beta/models/m:generateContent", body(user({"text": "?"}), generationConfig=config)
    )
    text = json.loads(data)["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(text) == {"next_speaker": "user"}

    status, _, data = post(mock, "/v1beta/models/m:countTokens", body(user({"text": "x"})))
    assert status == 200 and json.loads(data)["totalTokens"] > 0

    status, _, data = post(
        mock,
        "/v1beta/models/m:streamGenerateContent",
        body(user({"text": "[[fail: 429 | slow down]]"})),
    )
    assert (status, json.loads(data)) == (
        429,
        {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}},
    )
    status, _, _ = post(mock, "/v1beta/elsewhere", {})
    assert status == 404


def test_a_slow_reply_ends_when_the_mock_stops() -> None:
    server = MockGemini().start()
    host, port = server.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request(
        "POST",
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        json.dumps(body(user({"text": "[[slow: 30]]"}))),
    )
    response = conn.getresponse()
    assert response.read(1) == b"\n"  # a keep-alive newline
    started = time.monotonic()
    server.stop()
    response.read()
    conn.close()
    assert time.monotonic() - started < 5
