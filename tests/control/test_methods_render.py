"""Timestamps of the control API and the text the CLI renders from results, no I/O."""

from __future__ import annotations

import io
import time
from datetime import datetime

import pytest

from bridge.cli.render import (
    format_duration,
    format_moment,
    render_phones,
    render_qr,
    render_status,
    safe_text,
)
from bridge.control.methods import iso_timestamp, parse_timestamp


def test_iso_timestamps_round_trip() -> None:
    assert iso_timestamp(0) == "1970-01-01T00:00:00Z"
    assert iso_timestamp(1_700_000_000.7) == "2023-11-14T22:13:20Z"
    assert parse_timestamp("2023-11-14T22:13:20Z") == 1_700_000_000
    assert parse_timestamp("2023-11-14T22:13:20+00:00") == 1_700_000_000
    assert parse_timestamp("2023-11-14T22:13:20") == 1_700_000_000  # naive means UTC
    assert parse_timestamp(1_700_000_000) == 1_700_000_000.0


@pytest.mark.parametrize("value", [None, True, "yesterday", float("nan"), float("inf"), [], {}])
def test_unusable_timestamps(value: object) -> None:
    assert parse_timestamp(value) is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-3, "0 s"),
        (0, "0 s"),
        (59.9, "59 s"),
        (60, "1 min"),
        (3599, "59 min"),
        (3600, "1 h 00 min"),
        (3725, "1 h 02 min"),
        (86400 * 2 + 3600 * 4, "2 d 4 h"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_format_moment() -> None:
    now = 1_700_000_000.0
    local = datetime.fromtimestamp(now - 300).strftime("%Y-%m-%d %H:%M:%S")
    assert format_moment(iso_timestamp(now - 300), now=now) == f"{local} (5 min ago)"
    assert format_moment(None) == "never"
    assert format_moment("garbage") == "?"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("Pixel 8", "Pixel 8"),
        ("evil\x1b]0;pwned\x07", "evil?]0;pwned?"),
        ("a\nb\rc\td", "a?b?c?d"),
        ("c1\u009bcontrol", "c1?control"),
        ("npub\u202etxt.exe", "npub?txt.exe"),
        ("\u2066isolate\u2069", "?isolate?"),
        (None, "?"),
        (42, "42"),
    ],
)
def test_safe_text_neutralises_terminal_controls(raw: object, shown: str) -> None:
    assert safe_text(raw) == shown


def test_safe_text_caps_length() -> None:
    assert safe_text("x" * 500, limit=10) == "x" * 9 + "…"
    assert safe_text("x" * 10, limit=10) == "x" * 10


def test_render_status_is_tolerant_of_missing_and_mistyped_fields() -> None:
    lines = render_status({"version": "0.1.0", "pid": 4, "relays": "nope", "phones": [3, {}]})
    text = "\n".join(lines)
    assert "codedeck-bridge 0.1.0 is running (pid 4)" in text
    assert "  relays: none" in text
    assert "paired phones (1):" in text
    assert "last command: never" in text


def test_render_status_full() -> None:
    now = time.time()
    status = {
        "pid": 7,
        "startedAt": iso_timestamp(now - 3725),
        "version": "0.1.0",
        "npub": "npub1abc",
        "machine": "box",
        "home": "/h",
        "relays": [
            {
                "url": "wss://r",
                "state": "backoff",
                "lastEventAt": None,
                "lastError": "refused\x1b[2J",
            }
        ],
        "embeddedRelay": "ws://127.0.0.1:7777",
        "phones": [],
        "sessions": [{"sessionId": "s1", "state": "running", "title": "t", "cwd": "/w"}],
        "lastCommandAt": iso_timestamp(now - 10),
    }
    lines = render_status(status, now=now)
    assert lines[0] == "codedeck-bridge 0.1.0 is running (pid 7, up 1 h 02 min)"
    assert "    wss://r  backoff, last error: refused?[2J" in lines
    assert "  embedded relay: ws://127.0.0.1:7777" in lines
    assert "  paired phones: none; run `codedeck-bridge pair` to pair one" in lines
    assert "    s1  running  t  in /w" in lines
    assert lines[-1].startswith("  last command: ") and lines[-1].endswith("(10 s ago)")


def test_render_status_of_an_idle_daemon_has_no_empty_headings() -> None:
    lines = render_status(
        {"version": "0.1.0", "pid": 4, "relays": [], "phones": [], "sessions": []}
    )
    assert lines[1:-1] == [
        "  home:     ?",
        "  npub:     ?",
        "  machine:  ?",
        "  relays: none",
        "  paired phones: none; run `codedeck-bridge pair` to pair one",
        "  sessions: none; start one from the CodeDeck app",
    ]
    assert not [line for line in lines if line.endswith(":")]


@pytest.mark.parametrize(
    ("session", "line"),
    [
        ({"sessionId": "s1", "state": "idle"}, "    s1  idle"),  # a daemon before protocol 1.1
        (
            {"sessionId": "s1", "state": "running", "host": {"alive": True, "pid": 4242}},
            "    s1  running  host pid 4242",
        ),
        (
            {"sessionId": "s1", "state": "idle", "host": {"alive": False, "pid": None}},
            "    s1  idle  no host running",
        ),
        ({"sessionId": "s1", "state": "idle", "host": "junk"}, "    s1  idle"),
    ],
    ids=["no-host-field", "alive", "gone", "malformed"],
)
def test_render_status_shows_each_sessions_host(session: dict[str, object], line: str) -> None:
    lines = render_status({"sessions": [session], "hosts": {"running": 3}})
    assert line in lines
    assert "  session hosts: 3 running" in lines
    assert not any("session hosts" in text for text in render_status({"sessions": [session]}))


def test_render_phones() -> None:
    [line] = render_phones([{"npub": "npub1x", "label": "", "pairedAt": None}, "junk"])
    assert line == "Phone  npub1x  paired ?"


class _Ascii(io.StringIO):
    encoding = "ascii"


def test_render_qr_uses_half_blocks_or_ansi_when_the_encoding_cannot() -> None:
    url = (
        "codedeck://pair?npub=npub1x&relays=ws%3A%2F%2F127.0.0.1%3A7777&machine=m&token="
        + "ab" * 16
    )
    compact = render_qr(url, io.StringIO())
    assert "█" in compact and "\x1b" not in compact
    ansi = render_qr(url, _Ascii())
    assert "\x1b[7m" in ansi
    ansi.encode("ascii")


def test_render_qr_refuses_a_link_too_long_for_any_code() -> None:
    with pytest.raises(ValueError, match="too long for a QR code"):
        render_qr("x" * 8000, io.StringIO())
