"""The mock Anthropic API: its script (pure) and its HTTP answers (over a real socket)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

import pytest

from tests.support.mock_anthropic import MockAnthropic
from tests.support.mock_anthropic_script import Reply, parse_directives, plan_reply


def user(*texts: str, results: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = list(results or [])
    content += [{"type": "text", "text": t} for t in texts]
    return {"role": "user", "content": content}


def call(name: str, tool_id: str, tool_input: dict[str, Any] | None = None) -> dict[str, Any]:
    block = {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input or {}}
    return {"role": "assistant", "content": [block]}


def result(tool_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def shape(reply: Reply) -> list[tuple[str, str, Any]]:
    return [(b.type, b.name or b.text, b.input or None) for b in reply.blocks]


def test_parse_directives() -> None:
    assert parse_directives("a [[reply: x | y]] b [[think]] [[Bad]]") == [
        ("reply", ["x", "y"]),
        ("think", []),
    ]


PLAN_CASES: list[tuple[str, list[dict[str, Any]], list[tuple[str, str, Any]]]] = [
    (
        "reply",
        [user("<system-reminder>r</system-reminder>", "[[reply: hi]]")],
        [("text", "hi", None)],
    ),
    ("no-directive", [user("just text")], [("text", "echo: just text", None)]),
    (
        "think+reply",
        [user("[[think: hmm]] [[reply: ok]]")],
        [("thinking", "hmm", None), ("text", "ok", None)],
    ),
    (
        "bash",
        [user("[[say: Running.]] [[bash: ls -la]]")],
        [
            ("text", "Running.", None),
            ("tool_use", "Bash", {"command": "ls -la", "description": "Run a command"}),
        ],
    ),
    (
        "write",
        [user("[[write: /w/a | line1\\nline2 | more]]")],
        [("tool_use", "Write", {"file_path": "/w/a", "content": "line1\nline2 | more"})],
    ),
    (
        "edit",
        [user("[[edit: /w/a | old | new]]")],
        [("tool_use", "Edit", {"file_path": "/w/a", "old_string": "old", "new_string": "new"})],
    ),
    ("tool", [user('[[tool: Grep | {"pattern": "x"}]]')], [("tool_use", "Grep", {"pattern": "x"})]),
    # Merged user turns (after an interrupt): the last prompt's directives win.
    (
        "merged",
        [user("[[slow: 20]]", "[Request interrupted by user]", "[[reply: second]]")],
        [("text", "second", None)],
    ),
    # A tool result sharing the message with a new prompt: the prompt wins.
    (
        "result+prompt",
        [
            user("[[bash: ls]]"),
            call("Bash", "t1"),
            user("[[reply: new]]", results=[result("t1", "out")]),
        ],
        [("text", "new", None)],
    ),
    (
        "after-default",
        [user("[[bash: ls]]"), call("Bash", "t1"), user(results=[result("t1", "a.txt")])],
        [("text", "Done: a.txt", None)],
    ),
    (
        "after-scripted",
        [
            user("[[bash: ls]] [[after: All done]]"),
            call("Bash", "t1"),
            user(results=[result("t1", "x")]),
        ],
        [("text", "All done", None)],
    ),
    (
        "after-error",
        [
            user("[[bash: ls]]"),
            call("Bash", "t1"),
            user(results=[{**result("t1", "denied"), "is_error": True}]),
        ],
        [("text", "Done: error: denied", None)],
    ),
]


@pytest.mark.parametrize(
    ("messages", "expected"), [c[1:] for c in PLAN_CASES], ids=[c[0] for c in PLAN_CASES]
)
def test_plan_reply(messages: list[dict[str, Any]], expected: list[Any]) -> None:
    assert shape(plan_reply({"messages": messages})) == expected


def test_ask_builds_one_call_with_every_question() -> None:
    reply = plan_reply({"messages": [user("[[ask: Color? | Red | Blue]] [[ask: Size?]]")]})
    (block,) = reply.blocks
    assert block.name == "AskUserQuestion"
    questions = block.input["questions"]
    assert [q["question"] for q in questions] == ["Color?", "Size?"]
    assert [o["label"] for o in questions[0]["options"]] == ["Red", "Blue"]
    assert [o["label"] for o in questions[1]["options"]] == ["Yes", "No"]
    assert reply.stop_reason == "tool_use"


def test_exit_plan_writes_the_plan_file_then_loads_the_tool_then_calls_it() -> None:
    reminder = "Plan mode is active. You should create your plan at /c/plans/p-x.md using Write."
    prompt = user(reminder, "[[exit_plan: 1. Do it]]")
    step1 = plan_reply({"messages": [prompt]})
    assert shape(step1) == [
        ("tool_use", "Write", {"file_path": "/c/plans/p-x.md", "content": "1. Do it"})
    ]
    write_id = step1.blocks[0].id
    assert write_id.startswith("toolu_prep")
    history = [prompt, call("Write", write_id), user(results=[result(write_id, "File created")])]
    step2 = plan_reply({"messages": history})
    assert shape(step2) == [("tool_use", "ToolSearch", {"query": "select:ExitPlanMode"})]
    search_id = step2.blocks[0].id
    loaded = [{"type": "tool_reference", "tool_name": "ExitPlanMode"}]
    history += [call("ToolSearch", search_id), user(results=[result(search_id, loaded)])]
    step3 = plan_reply({"messages": history})
    assert shape(step3) == [("tool_use", "ExitPlanMode", {"plan": "1. Do it"})]
    exit_id = step3.blocks[0].id
    history += [call("ExitPlanMode", exit_id), user(results=[result(exit_id, "Approved")])]
    assert shape(plan_reply({"messages": history})) == [("text", "Done: Approved", None)]


@pytest.mark.parametrize(
    ("directive", "status", "error_type"),
    [
        ("[[fail: 500]]", 500, "api_error"),
        ("[[fail: 401 | bad key]]", 401, "authentication_error"),
        ("[[fail: 529]]", 529, "overloaded_error"),
        ("[[fail: oops]]", 500, "api_error"),
    ],
)
def test_failures(directive: str, status: int, error_type: str) -> None:
    reply = plan_reply({"messages": [user(directive)]})
    assert (reply.status, reply.error_type) == (status, error_type)


def test_slow_is_capped_and_waits_before_the_default_text() -> None:
    reply = plan_reply({"messages": [user("[[slow: 999]]")]})
    assert reply.delay == 60.0 and shape(reply) == [("text", "waited", None)]


# -- over HTTP ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mock() -> Any:
    with MockAnthropic() as running:
        yield running


def _post(
    mock: MockAnthropic, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, str, bytes]:
    host, port = mock.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(
            "POST", path, json.dumps(body), {"content-type": "application/json", **(headers or {})}
        )
        response = conn.getresponse()
        return response.status, response.getheader("content-type") or "", response.read()
    finally:
        conn.close()


def _events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in raw.decode().strip().split("\n\n"):
        event, data = chunk.split("\n")
        out.append((event.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def test_streaming_answer(mock: MockAnthropic) -> None:
    body = {"model": "m-1", "stream": True, "messages": [user("[[think: t]] [[bash: ls]]")]}
    status, ctype, raw = _post(mock, "/v1/messages?beta=true", body, {"x-api-key": "dummy"})
    assert (status, ctype) == (200, "text/event-stream")
    events = _events(raw)
    assert [e for e, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0][1]["message"]
    assert start["model"] == "m-1" and start["usage"]["input_tokens"] > 0
    assert [e[1]["delta"]["type"] for e in events if e[0] == "content_block_delta"] == [
        "thinking_delta",
        "signature_delta",
        "input_json_delta",
    ]
    tool_start = events[5][1]["content_block"]
    assert tool_start["name"] == "Bash" and tool_start["input"] == {}
    assert json.loads(events[6][1]["delta"]["partial_json"])["command"] == "ls"
    assert events[8][1]["delta"]["stop_reason"] == "tool_use"
    recorded = mock.requests[-1]
    assert (recorded.path, recorded.query, recorded.headers["x-api-key"]) == (
        "/v1/messages",
        "beta=true",
        "dummy",
    )
    assert recorded.prompt == "[[think: t]] [[bash: ls]]" and recorded.streaming


def test_non_streaming_answer_and_errors(mock: MockAnthropic) -> None:
    status, ctype, raw = _post(
        mock, "/v1/messages", {"model": "m", "max_tokens": 1, "messages": [user("Hi")]}
    )
    assert (status, ctype) == (200, "application/json")
    message = json.loads(raw)
    assert message["content"] == [{"type": "text", "text": "echo: Hi"}]
    assert message["stop_reason"] == "end_turn"
    status, _, raw = _post(
        mock, "/v1/messages", {"stream": True, "messages": [user("[[fail: 429]]")]}
    )
    assert status == 429
    assert json.loads(raw)["error"]["type"] == "rate_limit_error"
    assert json.loads(_post(mock, "/v1/messages/count_tokens", {"messages": []})[2]) == {
        "input_tokens": 4  # len(json.dumps({"messages": []})) // 4
    }
    assert _post(mock, "/v2/other", {})[0] == 404
    assert mock.message_requests()[-1].prompt == "[[fail: 429]]"


def test_slow_reply_ends_when_the_mock_stops() -> None:
    mock = MockAnthropic().start()
    outcome: dict[str, Any] = {}

    def request() -> None:
        try:
            outcome["reply"] = _post(
                mock, "/v1/messages", {"stream": True, "messages": [user("[[slow: 30]]")]}
            )
        except OSError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=request)
    thread.start()
    deadline = time.monotonic() + 10
    while not mock.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    mock.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    events = [e for e, _ in _events(outcome["reply"][2])] if "reply" in outcome else []
    assert "message_stop" not in events
