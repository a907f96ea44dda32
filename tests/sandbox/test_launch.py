"""The sandbox policy travels in the launch spec, checked like every other field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest

from bridge.engine.effects import SessionRecord
from bridge.engine.inputs import AgentReady
from bridge.engine.sessions.rules import to_remote_info
from bridge.host.driver import DriverSpec
from bridge.host.events import Ready, decode_event, encode_event
from bridge.host.launch import LaunchError, LaunchSpec, decode_launch, encode_launch
from bridge.runtime.hosts.records import host_event_input
from bridge.sandbox import SandboxPolicy

POLICY = SandboxPolicy(
    bwrap="/usr/bin/bwrap",
    cwd="/w/p",
    writable=("/h/.claude", "/h/.cache"),
    hidden_dirs=("/h/.ssh",),
    hidden_files=("/h/.netrc",),
    read_only=("/w/p/.git/hooks",),
)


def spec(sandbox: SandboxPolicy | None) -> LaunchSpec:
    return LaunchSpec("claude", Path("/h/.codedeck"), DriverSpec("s1", "/w/p", sandbox=sandbox))


@pytest.mark.parametrize("sandbox", [POLICY, None], ids=["sandboxed", "unconfined"])
def test_the_policy_round_trips(sandbox: SandboxPolicy | None) -> None:
    assert decode_launch(encode_launch(spec(sandbox))) == spec(sandbox)


def test_a_spec_without_the_field_is_unconfined() -> None:
    raw = orjson.loads(encode_launch(spec(POLICY)))
    del raw["driver"]["sandbox"]
    assert decode_launch(orjson.dumps(raw)).driver.sandbox is None


BAD = [
    ("not an object", 3, "driver.sandbox must be an object"),
    ("relative writable", {"writable": ["rel"]}, "driver.sandbox.writable"),
    ("option-like hidden", {"hidden_dirs": ["--bind"]}, "driver.sandbox.hidden_dirs"),
    ("NUL in read_only", {"read_only": ["/a\0b"]}, "driver.sandbox.read_only"),
    ("non-list", {"hidden_files": "/x"}, "driver.sandbox.hidden_files"),
    ("relative bwrap", {"bwrap": "bwrap"}, "driver.sandbox.bwrap"),
    ("missing cwd", {"cwd": None}, "driver.sandbox.cwd"),
]


@pytest.mark.parametrize(("name", "change", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_policy_is_refused(name: str, change: object, message: str) -> None:
    raw = orjson.loads(encode_launch(spec(POLICY)))
    if isinstance(change, dict):
        raw["driver"]["sandbox"].update(change)
    else:
        raw["driver"]["sandbox"] = change
    with pytest.raises(LaunchError, match=message):
        decode_launch(orjson.dumps(raw))


def test_ready_says_whether_the_agent_is_sandboxed() -> None:
    for sandboxed in (True, False):
        event = Ready("sdk", "m", "/w/p", sandboxed=sandboxed)
        assert decode_event(orjson.loads(orjson.dumps(encode_event(event)))) == event
    assert decode_event({"t": "ready", "sdk_session_id": None}) == Ready(None)


def test_the_hosts_word_reaches_the_record_and_the_phone() -> None:
    ready = host_event_input("s1", Ready("sdk", sandboxed=True))
    assert isinstance(ready, AgentReady) and ready.sandboxed is True
    record = SessionRecord("s1", "/w/p", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")
    assert to_remote_info(record).sandboxed is None  # not started yet: absent on the wire
    for sandboxed in (True, False):
        info = to_remote_info(dataclasses.replace(record, sandboxed=sandboxed))
        assert info.sandboxed is sandboxed
        assert info.model_dump(exclude_none=True)["sandboxed"] is sandboxed
