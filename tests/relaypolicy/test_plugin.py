"""The strfry plugin loop: one answer line per request line, whatever comes in.

In-process tests drive :func:`relaypolicy.plugin.serve` with byte streams; process tests run the
command line of ``deploy/relay/strfry.conf`` (see ``tests/support/strfry_plugin_policy.py``).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaypolicy import DEFAULT_CONFIG, MemoryRegistry, RelayPolicy
from relaypolicy.message import Decision, PolicyInput, is_hex64
from relaypolicy.plugin import MAX_LINE, serve
from relaypolicy.policies import PolicyContext
from store.errors import StoreError
from tests.relaypolicy.builders import BRIDGE, PHONE, STRANGER, make_request
from tests.support.strfry_plugin_policy import (
    CONTAINER_CONFIG,
    CONTAINER_REGISTRY,
    plugin_argv_from_conf,
    plugin_command,
)


def _policy() -> RelayPolicy:
    return RelayPolicy(MemoryRegistry([BRIDGE, PHONE]))


def _run(lines: list[bytes], policy: RelayPolicy | None = None, refresh: Any = None) -> list[Any]:
    stdin = io.BytesIO(b"".join(lines))
    stdout = io.BytesIO()
    status = serve(stdin, stdout, policy or _policy(), refresh or (lambda: None))
    assert status == 0
    out = stdout.getvalue()
    assert out == b"" or out.endswith(b"\n")
    return [orjson.loads(line) for line in out.splitlines()]


def _line(request: dict[str, Any]) -> bytes:
    return orjson.dumps(request) + b"\n"


def _check_answer(answer: Any) -> None:
    assert isinstance(answer, dict)
    assert set(answer) == {"id", "action", "msg"}
    assert answer["id"] == "" or is_hex64(answer["id"])
    assert answer["action"] in ("accept", "reject")
    assert isinstance(answer["msg"], str)


# --- in-process ------------------------------------------------------------------------------


def test_answers_in_order() -> None:
    requests = [
        make_request(pubkey=PHONE),
        make_request(kind=1),
        make_request(kind=30515, pubkey=STRANGER),
    ]
    answers = _run([_line(r) for r in requests])
    assert answers == [
        {"id": requests[0]["event"]["id"], "action": "accept", "msg": ""},
        {
            "id": requests[1]["event"]["id"],
            "action": "reject",
            "msg": "blocked: kind 1 is not accepted on this private relay",
        },
        {
            "id": requests[2]["event"]["id"],
            "action": "reject",
            "msg": "restricted: not a registered user",
        },
    ]


def test_every_bad_line_gets_one_answer() -> None:
    good = make_request()
    event_id = good["event"]["id"]
    lines = [
        b"\n",
        b"not json\n",
        _line(good)[: _line(good).index(event_id.encode()) + 65] + b"\n",  # cut after the id
        b"[1,2,3]\n",
        b"\x00\xff\xfe\n",
        b'{"type":"new","event":{"id":"' + b"A" * 64 + b'"}}\n',
        _line(good),
    ]
    answers = _run(lines)
    assert len(answers) == len(lines)
    for answer in answers:
        _check_answer(answer)
    assert [a["id"] for a in answers] == ["", "", event_id, "", "", "", event_id]
    assert answers[0]["msg"] == "invalid: request is not valid JSON"
    assert answers[3]["msg"] == "invalid: request is not a JSON object"
    assert answers[-1]["action"] == "accept"


def test_final_line_without_newline_is_answered() -> None:
    request = make_request()
    answers = _run([orjson.dumps(request)])
    assert answers == [{"id": request["event"]["id"], "action": "accept", "msg": ""}]


def test_oversized_line_is_rejected_and_the_loop_goes_on() -> None:
    big = make_request(content="x" * (MAX_LINE + 10))
    small = make_request()
    answers = _run([_line(big), _line(small)])
    assert answers[0] == {
        "id": big["event"]["id"],
        "action": "reject",
        "msg": "invalid: request line too long",
    }
    assert answers[1] == {"id": small["event"]["id"], "action": "accept", "msg": ""}


def test_a_line_of_exactly_max_line_bytes_is_read_whole() -> None:
    request = make_request()
    base = len(_line(request))
    request["event"]["content"] = "y" * (MAX_LINE - base)
    line = _line(request)
    assert len(line) == MAX_LINE
    assert _run([line, _line(make_request())])[0]["action"] == "accept"


def test_rule_errors_answer_internal_error_and_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(msg: PolicyInput, ctx: PolicyContext) -> Decision:
        raise ZeroDivisionError("secret detail")

    policy = RelayPolicy(MemoryRegistry(), DEFAULT_CONFIG, policies=[broken])
    requests = [make_request(), make_request()]
    answers = _run([_line(r) for r in requests], policy)
    assert [a["msg"] for a in answers] == ["error: internal error"] * 2
    assert [a["id"] for a in answers] == [r["event"]["id"] for r in requests]
    assert "a rule failed on event" in caplog.text
    assert "secret detail" not in "".join(str(a) for a in answers)


def test_registry_failures_fail_closed_then_recover(caplog: pytest.LogCaptureFixture) -> None:
    failing = {"on": True}

    def refresh() -> None:
        if failing["on"]:
            raise StoreError("registry.db: disk on fire")

    requests = [make_request() for _ in range(3)]
    stdin = io.BytesIO(_line(requests[0]) + _line(requests[1]))
    stdout = io.BytesIO()
    policy = _policy()
    serve(stdin, stdout, policy, refresh)
    failing["on"] = False
    serve(io.BytesIO(_line(requests[2])), stdout, policy, refresh)
    answers = [orjson.loads(x) for x in stdout.getvalue().splitlines()]
    assert [a["msg"] for a in answers] == ["error: internal error"] * 2 + [""]
    assert [a["id"] for a in answers] == [r["event"]["id"] for r in requests]
    # Logged once per interval, not once per event.
    assert caplog.text.count("registry unavailable") == 1


def test_a_closed_stdout_ends_the_loop() -> None:
    class Closed(io.BytesIO):
        def write(self, data: Any) -> int:
            raise BrokenPipeError

    assert serve(io.BytesIO(_line(make_request()) * 3), Closed(), _policy(), lambda: None) == 0


LINE_PIECES = st.one_of(
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")),
    st.text(max_size=200).map(lambda t: t.replace("\n", "").encode("utf-8", "surrogatepass")),
    st.builds(
        lambda kind, cut: _line(make_request(kind=kind))[:cut],
        st.integers(0, 65535),
        st.integers(0, 400),
    ).map(lambda b: b.replace(b"\n", b"")),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.floats(allow_nan=False)
        | st.text(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.sampled_from(["type", "event", "id", "kind", "tags"]), children)
        ),
        max_leaves=10,
    ).map(lambda v: orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LINE_PIECES, min_size=1, max_size=20))
def test_fuzz_one_answer_per_line(pieces: list[bytes]) -> None:
    answers = _run([piece + b"\n" for piece in pieces])
    assert len(answers) == len(pieces)
    for piece, answer in zip(pieces, answers, strict=True):
        _check_answer(answer)
        assert answer["id"] == "" or answer["id"].encode() in piece


# --- the real process ----------------------------------------------------------------------


def test_strfry_conf_runs_the_plugin_with_the_registry_volume() -> None:
    argv = plugin_argv_from_conf()
    assert argv == [
        "codedeck-relaypolicy",
        "plugin",
        "--registry",
        CONTAINER_REGISTRY,
        "--config",
        CONTAINER_CONFIG,
    ]


def test_plugin_command_replaces_only_program_and_paths(tmp_path: Path) -> None:
    command = plugin_command(tmp_path / "r.db", tmp_path / "c.toml")
    assert command == (
        f"{sys.executable} -m relaypolicy plugin --registry {tmp_path / 'r.db'} "
        f"--config {tmp_path / 'c.toml'}"
    )
