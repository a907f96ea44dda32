"""The provider base-URL rule (PROTOCOL.md §13)."""

from __future__ import annotations

import pytest

from bridge.protocol import BASE_URL_ERROR, base_url_allowed

ALLOWED = [
    "https://api.example.com",
    "https://api.moonshot.ai/anthropic",
    "HTTPS://API.EXAMPLE.COM/V1",
    "https://example.com:8443/x?y=1#z",
    "https://[2001:db8::1]/v1",
    "http://localhost",
    "http://localhost:8080/v1",
    "http://LOCALHOST:1",
    "http://127.0.0.1",
    "http://127.0.0.1:11434/v1",
    "http://[::1]",
    "http://[::1]:3000/path",
    "http://[0:0:0:0:0:0:0:1]:3000",
    "http://user:pass@localhost:9",
    "  https://padded.example  ",
]

REFUSED = [
    "",
    "example.com",
    "http://example.com",
    "http://0.0.0.0:8080",
    "http://api.localhost",
    "http://localhost.",
    "http://127.0.0.1.",
    "http://127.1",
    "http://0x7f.1",
    "http://[::2]",
    "http://[::ffff:127.0.0.1]",
    "ftp://files.example",
    "ws://localhost",
    "javascript:alert(1)",
    "https:",
    "https://",
    "https:///path",
    "https:example.com",
    "https://exa mple.com",
    "https://exa<mple.com",
    "https://x.example:99999",
    "https://[zz::1]",
    "https://x\x00y.example",
    "not a url",
]


@pytest.mark.parametrize("url", ALLOWED)
def test_allowed(url: str) -> None:
    assert base_url_allowed(url)


@pytest.mark.parametrize("url", REFUSED)
def test_refused(url: str) -> None:
    assert not base_url_allowed(url)


def test_error_text_is_exact() -> None:
    assert BASE_URL_ERROR == (
        "Base URL must be https:// (http:// is allowed only for localhost, 127.0.0.1 or [::1])"
    )
