"""A session host's log never shows the agent's credentials (they ride in its environment)."""

from __future__ import annotations

import logging

from bridge.host.__main__ import _secret_values
from bridge.redaction import REDACTED, SecretsFilter

ENV = {
    "PATH": "/usr/bin",
    "ANTHROPIC_AUTH_TOKEN": "kimi-token-5f2c9a71",
    "MY_SERVICE_KEY": "k-0f9e8d7c6b5a",
    "HOME": "/home/u",
}


def test_credential_variables_are_masked_whatever_their_name_and_path_is_not() -> None:
    assert sorted(_secret_values(ENV)) == ["k-0f9e8d7c6b5a", "kimi-token-5f2c9a71"]
    record = logging.LogRecord(
        "bridge.agents.claude", logging.INFO, __file__, 1, "claude stderr: %s", None, None
    )
    record.args = ("auth kimi-token-5f2c9a71 failed, key k-0f9e8d7c6b5a, sk-ant-api03-abcdef",)
    SecretsFilter(_secret_values(ENV)).filter(record)
    text = record.getMessage()
    assert "kimi-token" not in text and "k-0f9e8d7c6b5a" not in text and "abcdef" not in text
    assert text.count(REDACTED) == 3 and "/usr/bin" not in _secret_values(ENV)
