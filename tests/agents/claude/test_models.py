"""The model list: from an initialize answer, and from a short-lived CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.agents.claude import fetch_models, models_from_server_info


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (None, []),
        ({}, []),
        ({"models": "nope"}, []),
        (
            {
                "models": [
                    {"value": "default", "displayName": "Default (recommended)"},
                    {"value": "opus", "displayName": "Opus"},
                    {"value": "opus", "displayName": "again"},
                    {"value": "", "displayName": "empty"},
                    {"value": "haiku"},
                    "junk",
                ]
            },
            [("default", "Default (recommended)"), ("opus", "Opus"), ("haiku", None)],
        ),
    ],
)
def test_models_from_server_info(info: dict[str, Any] | None, expected: list[Any]) -> None:
    assert [(m.id, m.label) for m in models_from_server_info(info)] == expected


async def test_fetch_models_reports_an_unusable_cli_as_empty(tmp_path: Path) -> None:
    assert await fetch_models(tmp_path, cli_path=tmp_path / "no-such-claude", timeout=10) == []
