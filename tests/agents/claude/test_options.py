"""Option values at start and changes while running, against a recorded request function."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from bridge.agents.claude import (
    ControlError,
    change_effort,
    change_mode,
    change_model,
    requested_mode,
    start_effort,
    start_mode,
)


class Cli:
    def __init__(self, applied_effort: Any = "high", refuse: bool = False) -> None:
        self.sent: list[Mapping[str, Any]] = []
        self.applied_effort = applied_effort
        self.refuse = refuse

    async def request(self, request: Mapping[str, Any]) -> dict[str, Any]:
        self.sent.append(request)
        if self.refuse:
            raise ControlError("refused")
        if request["subtype"] == "get_settings":
            return {"applied": {"effort": self.applied_effort}}
        return {}


@pytest.mark.parametrize(
    ("value", "start", "requested"),
    [
        ("default", "default", "default"),
        ("acceptEdits", "acceptEdits", "acceptEdits"),
        ("plan", "plan", "plan"),
        ("bypassPermissions", "default", "default"),
        ("dontAsk", "plan", None),
        ("", "plan", None),
    ],
)
def test_modes(value: str, start: str, requested: str | None) -> None:
    assert start_mode(value) == start
    assert requested_mode(value) == requested


@pytest.mark.parametrize(
    ("value", "expected"),
    [("high", "high"), ("max", "max"), ("auto", None), ("x", None), (None, None)],
)
def test_start_effort(value: str | None, expected: str | None) -> None:
    assert start_effort(value) == expected


async def test_change_mode() -> None:
    cli = Cli()
    assert await change_mode(cli.request, "bypassPermissions") == "default"
    assert await change_mode(cli.request, "yolo") is None
    assert cli.sent == [{"subtype": "set_permission_mode", "mode": "default"}]


@pytest.mark.parametrize(
    ("value", "applied", "expected", "flag"),
    [
        ("high", "high", "high", "high"),
        ("xhigh", "high", "high", "xhigh"),  # clamped by the CLI for this model
        ("auto", "medium", "auto", None),
        ("max", "garbage", None, "max"),
        ("low", None, None, "low"),
    ],
)
async def test_change_effort(value: str, applied: Any, expected: str | None, flag: Any) -> None:
    cli = Cli(applied)
    assert await change_effort(cli.request, value) == expected
    assert cli.sent == [
        {"subtype": "apply_flag_settings", "settings": {"effortLevel": flag}},
        {"subtype": "get_settings"},
    ]


async def test_change_effort_refuses_unknown_levels_without_asking() -> None:
    cli = Cli()
    assert await change_effort(cli.request, "extreme") is None
    assert cli.sent == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [(" sonnet ", "sonnet"), ("", None), ("x" * 201, None), ("bad\nname", None)],
)
async def test_change_model(value: str, expected: str | None) -> None:
    cli = Cli()
    assert await change_model(cli.request, value) == expected
    assert cli.sent == ([{"subtype": "set_model", "model": expected}] if expected else [])


async def test_a_refusal_raises() -> None:
    with pytest.raises(ControlError):
        await change_model(Cli(refuse=True).request, "opus")
