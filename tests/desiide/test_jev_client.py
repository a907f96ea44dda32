"""The JEV client against a real HTTP server on 127.0.0.1, its strict result parsing, and the
one-way risk combination."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.desiide.jev.client import (
    DEFAULT_WORKFLOWS,
    JEV_NOT_CONFIGURED,
    MALFORMED_RESULT,
    SYSTEM_PROMPT,
    JevClient,
    JevError,
    build_prompt,
)
from bridge.desiide.jev.packs import build_cost_route, build_risk_gate
from bridge.desiide.jev.results import (
    ChoiceResult,
    MalformedResult,
    NoulResult,
    ScoreResult,
    parse_choice,
    parse_noul,
    parse_result,
    parse_score,
)
from bridge.desiide.jev.risk import JEV_RISK_LABEL, combine, combine_with_reasons
from bridge.desiide.settings import JevSettings, RiskOutcome, SecretNotSet, SecretRef
from tests.support.mock_jev import MockModelApi, Scripted, anthropic_text, error_body

KEY = "jev-key-SECRET-456"


class FakeSecrets:
    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values = values if values is not None else {"secret:jev": KEY}

    async def get(self, ref: str) -> str | None:
        return self.values.get(ref)


@pytest.fixture
def api() -> Iterator[MockModelApi]:
    with MockModelApi() as server:
        yield server


def client_for(api: MockModelApi, **overrides: Any) -> JevClient:
    settings: dict[str, Any] = {
        "base_url": api.base_url,
        "model": "judge-1",
        "api_key": SecretRef("jev"),
    }
    settings.update(overrides)
    return JevClient(JevSettings(**settings), FakeSecrets())


RISK_STATE = build_risk_gate(
    action_type="run_command",
    command="make deploy",
    paths=["deploy.sh"],
    branch="main",
    env="local",
    has_pending_migrations=False,
)


# --- judgements --------------------------------------------------------------------------------


async def test_a_risk_judgement_sends_the_state_and_parses_the_noul(api: MockModelApi) -> None:
    api.script("/v1/messages", Scripted(200, anthropic_text('{"answer": "yes", "pYes": 0.83}')))
    judgement = await client_for(api).judge("risk_gate@1", RISK_STATE)
    assert judgement.pack == "risk_gate@1"
    assert judgement.result == NoulResult("yes", 0.83)
    assert judgement.result.to_wire() == {"answer": "yes", "pYes": 0.83}
    assert isinstance(judgement.latency_ms, int) and judgement.latency_ms >= 0
    (request,) = api.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = request.body
    assert {k: body[k] for k in ("model", "max_tokens", "temperature", "system")} == {
        "model": "judge-1",
        "max_tokens": 256,
        "temperature": 0,
        "system": SYSTEM_PROMPT,
    }
    (message,) = body["messages"]
    assert message["role"] == "user"
    assert message["content"] == build_prompt("risk_gate@1", RISK_STATE)
    assert message["content"].startswith("Pack: risk_gate@1\nShould the user confirm")
    state_json = message["content"].split("State:\n", 1)[1]
    assert json.loads(state_json) == RISK_STATE


async def test_bearer_auth_and_no_key(api: MockModelApi) -> None:
    await client_for(api, auth="bearer").judge("risk_gate@1", RISK_STATE)
    await client_for(api, api_key=None).judge("risk_gate@1", RISK_STATE)
    keyed, keyless = api.requests
    assert keyed.headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in keyed.headers
    assert "authorization" not in keyless.headers and "x-api-key" not in keyless.headers


async def test_a_workflow_choice_uses_the_default_options(api: MockModelApi) -> None:
    reply = '{"selected": "plan_then_edit", "probs": {"plan_then_edit": 0.7, "single_pass": 0.3}}'
    api.script("/v1/messages", Scripted(200, anthropic_text(reply)))
    judgement = await client_for(api).judge("workflow_select@1", {"taskType": "edit"})
    assert judgement.result == ChoiceResult(
        "plan_then_edit", {"plan_then_edit": 0.7, "single_pass": 0.3}
    )
    prompt = api.requests[0].body["messages"][0]["content"]
    assert 'Options: "single_pass", "plan_then_edit", "iterate_with_checks".' in prompt
    assert DEFAULT_WORKFLOWS == ("single_pass", "plan_then_edit", "iterate_with_checks")


async def test_a_cost_score_with_probs(api: MockModelApi) -> None:
    reply = '```json\n{"score": 3, "probs": [0, 0.1, 0.2, 0.6, 0.1]}\n```'
    api.script("/v1/messages", Scripted(200, anthropic_text(reply)))
    state = build_cost_route(
        task_type="fix",
        files_touched_count=4,
        project_size_lines=50000,
        user_cost_bias=None,
        recent_failures=0,
    )
    judgement = await client_for(api).judge("cost_route@1", state)
    assert judgement.result == ScoreResult(3, (0.0, 0.1, 0.2, 0.6, 0.1))


async def test_the_key_goes_to_a_base_url_with_v1_once(api: MockModelApi) -> None:
    await client_for(api, base_url=api.base_url + "/v1/").judge("risk_gate@1", RISK_STATE)
    assert api.requests[0].path == "/v1/messages"


# --- failures ----------------------------------------------------------------------------------


async def test_not_configured_is_a_clear_error_never_a_result() -> None:
    client = JevClient(None, FakeSecrets())
    assert client.configured is False
    with pytest.raises(JevError) as caught:
        await client.judge("risk_gate@1", RISK_STATE)
    assert (caught.value.kind, caught.value.message) == (
        JEV_NOT_CONFIGURED,
        "no JEV model is configured",
    )
    test = await client.test()
    assert test.to_wire() == {
        "ok": False,
        "error": {
            "kind": "jev_not_configured",
            "message": "no JEV model is configured",
            "hint": "Set desiide.jev (base URL, model, API key) in the settings.",
        },
    }


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Sure! The answer is yes.", "the reply is not a JSON object"),
        ('{"answer": "yes", "pYes": 0.9} I think', "the reply is not valid JSON (Extra data)"),
        ('{"answer": "maybe", "pYes": 0.5}', "answer is not yes, no or unknown"),
        ('{"answer": "yes"}', "missing pYes"),
        ('{"answer": "yes", "pYes": 1.5}', "pYes is not between 0 and 1"),
        ('{"answer": "yes", "pYes": 0.9, "why": "x"}', "unexpected key(s) why"),
    ],
)
async def test_a_malformed_reply_is_an_error(api: MockModelApi, text: str, why: str) -> None:
    api.script("/v1/messages", Scripted(200, anthropic_text(text)))
    with pytest.raises(JevError) as caught:
        await client_for(api).judge("risk_gate@1", RISK_STATE)
    assert caught.value.kind == MALFORMED_RESULT
    assert caught.value.message == f"the judge's reply does not fit the noul format: {why}"


async def test_a_reply_without_text_is_malformed(api: MockModelApi) -> None:
    api.script("/v1/messages", Scripted(200, {"content": [{"type": "tool_use", "id": "x"}]}))
    with pytest.raises(JevError, match="the answer has no text") as caught:
        await client_for(api).judge("risk_gate@1", RISK_STATE)
    assert caught.value.kind == MALFORMED_RESULT
    api.script("/v1/messages", Scripted(200, {"choices": []}))
    with pytest.raises(JevError, match="the answer has no content"):
        await client_for(api).judge("risk_gate@1", RISK_STATE)


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [(401, "auth", False), (429, "rate_limit", True), (529, "overloaded", True), (404, "not_found", False)],
)  # fmt: skip
async def test_http_failures_carry_the_model_error_kind(
    api: MockModelApi, status: int, kind: str, retryable: bool
) -> None:
    api.script("/v1/messages", Scripted(status, error_body("x_error", "nope")))
    with pytest.raises(JevError) as caught:
        await client_for(api).judge("risk_gate@1", RISK_STATE)
    assert (caught.value.kind, caught.value.message, caught.value.retryable) == (
        kind,
        f"HTTP {status}: nope",
        retryable,
    )
    assert caught.value.hint


async def test_a_slow_judge_times_out(api: MockModelApi) -> None:
    api.script("/v1/messages", Scripted(200, anthropic_text("{}"), delay=5))
    started = time.monotonic()
    with pytest.raises(JevError) as caught:
        await client_for(api, timeout_ms=300).judge("risk_gate@1", RISK_STATE)
    assert time.monotonic() - started < 2
    assert caught.value.kind == "timeout"


async def test_a_missing_secret_raises_secret_not_set(api: MockModelApi) -> None:
    client = JevClient(
        JevSettings(base_url=api.base_url, model="m", api_key=SecretRef("gone")), FakeSecrets()
    )
    with pytest.raises(SecretNotSet):
        await client.judge("risk_gate@1", RISK_STATE)
    with pytest.raises(SecretNotSet):
        await client.test()
    assert api.requests == []


async def test_jev_test_is_one_real_small_judgement(
    api: MockModelApi, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    result = await client_for(api).test()
    assert result.ok is True and result.error is None
    assert result.to_wire() == {"ok": True, "latencyMs": result.latency_ms}
    (request,) = api.requests
    assert "Pack: risk_gate@1" in request.body["messages"][0]["content"]
    assert '"command":"git status"' in request.body["messages"][0]["content"]

    api.script("/v1/messages", Scripted(200, anthropic_text("I cannot answer that.")))
    bad = await client_for(api).test()
    assert bad.ok is False and bad.error is not None and bad.error.kind == MALFORMED_RESULT
    api.script("/v1/messages", Scripted(401, error_body("authentication_error", f"bad {KEY}")))
    refused = await client_for(api).test()
    assert refused.to_wire()["error"]["kind"] == "auth"
    assert refused.to_wire()["error"]["message"] == "HTTP 401: bad ***"
    assert KEY not in "\n".join(r.getMessage() for r in caplog.records)


# --- strict parsing (pure) ---------------------------------------------------------------------

OPTIONS = ("a", "b")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"selected": "c", "probs": {"a": 1}}', "selected is not one of the offered options"),
        ('{"selected": "a", "probs": {"c": 1}}', "probs names an option that was not offered"),
        ('{"selected": "a", "probs": {"a": 0.5}}', "probs do not sum to 1"),
        ('{"selected": "a", "probs": {}}', "probs is not a non-empty object"),
        ('{"selected": "a", "probs": {"a": "1"}}', "probs['a'] is not a number"),
        ('{"selected": "a", "probs": {"a": true}}', "probs['a'] is not a number"),
        ('{"selected": "a"}', "missing probs"),
        ('["a"]', "the reply is not a JSON object"),
    ],
)
def test_choice_refusals(text: str, why: str) -> None:
    with pytest.raises(MalformedResult) as caught:
        parse_choice(text, OPTIONS)
    assert str(caught.value) == why


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"score": 5}', "score is not an integer from 0 to 4"),
        ('{"score": 2.0}', "score is not an integer from 0 to 4"),
        ('{"score": true}', "score is not an integer from 0 to 4"),
        ('{"score": 2, "probs": [0.5, 0.5]}', "probs is not a list of five probabilities (scores 0 to 4)"),
        ('{"score": 2, "probs": [0.5, 0.5, 0.5, 0, 0]}', "probs do not sum to 1"),
        ('{"score": 2, "probs": [0.5, 0.5, -0.1, 0, 0.1]}', "probs[2] is not between 0 and 1"),
        ('{"score": 2, "extra": 1}', "unexpected key(s) extra"),
        ('{"score": NaN}', "score is not an integer from 0 to 4"),
    ],
)  # fmt: skip
def test_score_refusals(text: str, why: str) -> None:
    with pytest.raises(MalformedResult) as caught:
        parse_score(text)
    assert str(caught.value) == why


def test_accepted_shapes() -> None:
    assert parse_choice(' {"selected": "b", "probs": {"a": 0.02, "b": 0.97}} ', OPTIONS) == (
        ChoiceResult("b", {"a": 0.02, "b": 0.97})
    )
    assert parse_score('{"score": 0}') == ScoreResult(0)
    assert parse_score('{"score": 4, "probs": null}') == ScoreResult(4)
    assert parse_noul('```\n{"answer": "unknown", "pYes": 0}\n```') == NoulResult("unknown", 0.0)
    assert parse_result("noul", '{"answer": "no", "pYes": 1}') == NoulResult("no", 1.0)
    assert parse_result("choice", '{"selected": "a", "probs": {"a": 1}}', OPTIONS) == (
        ChoiceResult("a", {"a": 1.0})
    )
    assert ScoreResult(1, (0.2, 0.8, 0, 0, 0)).to_wire() == {
        "score": 1,
        "probs": [0.2, 0.8, 0, 0, 0],
    }
    with pytest.raises(MalformedResult, match="nested too deeply"):
        parse_noul('{"a":' + "[" * 100_000)


# --- the risk combination (pure) ---------------------------------------------------------------

COMBINE_CASES: list[tuple[RiskOutcome, NoulResult | None, RiskOutcome]] = [
    ("auto", NoulResult("yes", 0.9), "confirm"),
    ("auto", NoulResult("unknown", 0.2), "confirm"),
    ("auto", NoulResult("no", 0.1), "auto"),
    ("auto", NoulResult("no", 0.5), "confirm"),  # contradicts itself: read the cautious way
    ("auto", None, "auto"),
    ("confirm", NoulResult("no", 0.0), "confirm"),  # never lowers
    ("confirm", NoulResult("yes", 1.0), "confirm"),
    ("block", NoulResult("no", 0.0), "block"),  # never touches a block
    ("block", NoulResult("yes", 1.0), "block"),
    ("block", None, "block"),
]


@pytest.mark.parametrize(("rule", "verdict", "want"), COMBINE_CASES)
def test_a_jev_verdict_only_raises_auto_to_confirm(
    rule: RiskOutcome, verdict: NoulResult | None, want: RiskOutcome
) -> None:
    assert combine(rule, verdict) == want


def test_the_raise_is_labelled() -> None:
    assert JEV_RISK_LABEL == "jev:risk_gate"
    assert combine_with_reasons("auto", ["x"], NoulResult("yes", 0.9)) == (
        "confirm",
        ("x", JEV_RISK_LABEL),
    )
    assert combine_with_reasons("confirm", ["privileged"], NoulResult("yes", 0.9)) == (
        "confirm",
        ("privileged",),
    )
    assert combine_with_reasons("auto", [], NoulResult("no", 0.0)) == ("auto", ())


def test_jev_error_wire_shape() -> None:
    assert JevError("auth", "m", "h").to_wire() == {"kind": "auth", "message": "m", "hint": "h"}
    assert JevError("malformed_result", "m").to_wire() == {
        "kind": "malformed_result",
        "message": "m",
    }
