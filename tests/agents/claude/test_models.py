"""The model list: from an initialize answer, and from a short-lived (fake) CLI."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.agents.claude import models_from_initialize
from bridge.host.events import ModelChoice


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (None, ()),
        ({}, ()),
        ({"models": "nope"}, ()),
        (
            {
                "models": [
                    {"value": "default", "displayName": "Default (recommended)"},
                    {"value": "opus", "displayName": "Opus"},
                    {"value": "opus", "displayName": "again"},
                    {"value": "", "displayName": "empty"},
                    {"value": "haiku", "displayName": 3},
                    "junk",
                ]
            },
            (
                ModelChoice("default", "Default (recommended)"),
                ModelChoice("opus", "Opus"),
                ModelChoice("haiku", None),
            ),
        ),
    ],
)
def test_models_from_initialize(info: dict[str, Any] | None, expected: tuple[Any, ...]) -> None:
    assert models_from_initialize(info) == expected
