"""The chaos model, pure: its prompt grammar and its reply to each request shape Claude Code sends."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.cli.model import (
    Prompt,
    done_text,
    parse_done,
    parse_prompts,
    plan_chaos_reply,
    prompt_text,
    summarize,
)

A = Prompt("cc-000001", "echo cc-000001 >> /w/ledger.txt")
B = Prompt("cc-000002")
SLOW = Prompt("cc-000003", "echo cc-000003 >> /w/ledger.txt", 1.5)
INTERRUPTED = (
    "[Tool call interrupted: the session ended before this call's result was recorded, so its "
    "outcome is unknown.]"
)


def user(*blocks: dict[str, Any] | str) -> dict[str, Any]:
    content = [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]
    return {"role": "user", "content": content}


def bash_call(tool_id: str, prompt: Prompt) -> dict[str, Any]:
    call = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": prompt.command}}
    return {"role": "assistant", "content": [call]}


def result(tool_id: str, text: str, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": is_error}


def shape(body: dict[str, Any]) -> list[tuple[str, str]]:
    reply = plan_chaos_reply(body)
    return [(b.type, b.text or str(b.input.get("command"))) for b in reply.blocks]


@pytest.mark.parametrize("prompt", [A, B, SLOW], ids=["bash", "reply", "slow"])
def test_prompt_round_trip(prompt: Prompt) -> None:
    assert parse_prompts(f"<system-reminder>x</system-reminder>\n{prompt_text(prompt)}") == [prompt]


def test_done_text_round_trip() -> None:
    assert parse_done(done_text("cc-000009")) == "cc-000009"
    assert parse_done("done cc-000009 and more") is None


CASES = [
    ("reply", {"messages": [user(prompt_text(B))]}, [("text", "done cc-000002")]),
    ("bash", {"messages": [user(prompt_text(A))]}, [("tool_use", A.command or "")]),
    (
        "bash-answered",
        {
            "messages": [
                user(prompt_text(A)),
                bash_call("toolu_1", A),
                user(result("toolu_1", "(Bash completed with no output)")),
            ]
        },
        [("text", "done cc-000001")],
    ),
    (
        "denied-goes-on",
        {
            "messages": [
                user(prompt_text(A)),
                bash_call("toolu_1", A),
                user(result("toolu_1", "The user denied this tool call.", True)),
            ]
        },
        [("text", "done cc-000001")],
    ),
    (
        "queued-beside-the-result",  # Claude Code folds a prompt sent mid-turn into the turn
        {
            "messages": [
                user(prompt_text(A)),
                bash_call("toolu_1", A),
                user(result("toolu_1", "ok"), "The user sent a new message:\n" + prompt_text(B)),
            ]
        },
        [("text", "done cc-000001"), ("text", "done cc-000002")],
    ),
    (
        "interrupted-by-a-dead-cli",  # that turn is over: only the new prompt is answered
        {
            "messages": [
                user(prompt_text(A)),
                bash_call("toolu_1", A),
                user(result("toolu_1", INTERRUPTED, True), prompt_text(B)),
            ]
        },
        [("text", "done cc-000002")],
    ),
    (
        "two-prompts-both-run",
        {"messages": [user(prompt_text(A), prompt_text(SLOW))]},
        [("tool_use", A.command or ""), ("tool_use", SLOW.command or "")],
    ),
    ("nothing-of-ours", {"messages": [user("hello")]}, [("text", "ok")]),
]


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_reply(body: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert shape(body) == expected


def test_latency_only_for_a_new_prompt_and_slow_wins() -> None:
    answered = {"messages": [user(prompt_text(A)), bash_call("t", A), user(result("t", "ok"))]}
    assert plan_chaos_reply(answered, latency=0.4).delay == 0.0
    assert plan_chaos_reply({"messages": [user(prompt_text(B))]}, latency=0.4).delay == 0.4
    assert plan_chaos_reply({"messages": [user(prompt_text(SLOW))]}, latency=0.4).delay == 1.5


def test_summary_of_a_request() -> None:
    body = {
        "messages": [
            user(prompt_text(A)),
            bash_call("toolu_1", A),
            user(result("toolu_1", INTERRUPTED, True), prompt_text(B)),
        ]
    }
    call = summarize(body, 1.0)
    assert (call.prompts, call.results, call.interrupted) == (
        ("cc-000002",),
        ("cc-000001",),
        ("cc-000001",),
    )
