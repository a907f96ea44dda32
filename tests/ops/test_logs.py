"""``bridge.logs``: text and JSON lines, stable context keys, journald priorities, redaction."""

from __future__ import annotations

import io
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.logs import (
    REDACTED,
    JsonFormatter,
    RedactionFilter,
    TextFormatter,
    clear_registered_secrets,
    configure_logging,
    log_fields,
    redact,
    register_secret,
    resolve_format,
)
from bridge.nostr.keys import Keypair

KEY = Keypair.from_secret("07" * 32)
PHONE = Keypair.from_secret("08" * 32)
EVENT_ID = "ab" * 32


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
        clear_registered_secrets()


def emit(fmt: str, *args: object, stream: io.StringIO | None = None, **kwargs: object) -> str:
    out = stream if stream is not None else io.StringIO()
    configure_logging("DEBUG", fmt, stream=out, env={})
    logging.getLogger("bridge.test").info(*args, **kwargs)  # type: ignore[arg-type]
    return out.getvalue()


# --- formats ------------------------------------------------------------------------------------


def test_text_line_has_level_logger_message_and_stable_keys_in_order() -> None:
    extra = {"zeta": 1, **log_fields(event=EVENT_ID, session="s-1", phone=PHONE.public_hex)}
    extra["type"] = "input"
    line = emit("text", "input %s", "accepted", extra=extra)
    assert line.count("\n") == 1
    head = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} INFO    bridge\.test: input accepted  "
    assert re.match(head, line)
    tail = line.split("input accepted  ", 1)[1].strip()
    assert tail == f"phone={PHONE.npub[:16]} session=s-1 type=input event=abababab zeta=1"


def test_text_escapes_control_characters_so_a_label_cannot_forge_a_line() -> None:
    line = emit("text", "paired %s", "Pixel\nINFO bridge: fake\x1b[2J", extra={"label": "a b"})
    assert line.count("\n") == 1
    assert "\\n" in line and "\\x1b" in line
    assert 'label="a b"' in line


def test_json_line_parses_with_stable_keys_and_exception() -> None:
    out = io.StringIO()
    configure_logging("INFO", "json", stream=out, env={})
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("bridge.x").exception(
            "failed on %s", "input", extra=log_fields(session="s-2", msg_type="input")
        )
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    body = json.loads(lines[0])
    assert body["level"] == "ERROR" and body["logger"] == "bridge.x"
    assert body["message"] == "failed on input"
    assert body["session"] == "s-2" and body["type"] == "input"
    assert "ValueError: boom" in body["exception"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", body["time"])
    assert list(body)[:6] == ["time", "level", "logger", "message", "session", "type"]


def test_auto_is_text_on_a_terminal_and_json_elsewhere() -> None:
    assert resolve_format("auto", Tty()) == "text"
    assert resolve_format("auto", io.StringIO()) == "json"
    assert resolve_format("text", io.StringIO()) == "text"
    with pytest.raises(ValueError, match="--log-format must be one of auto, text, json"):
        resolve_format("yaml", io.StringIO())
    assert emit("auto", "hi", stream=Tty()).split(" ")[2] == "INFO"
    assert json.loads(emit("auto", "hi"))["message"] == "hi"


def test_journald_stream_gets_syslog_priorities(tmp_path: Path) -> None:
    target = tmp_path / "journal"
    with target.open("w") as stream:
        info = os.fstat(stream.fileno())
        env = {"JOURNAL_STREAM": f"{info.st_dev}:{info.st_ino}"}
        configure_logging("DEBUG", "json", stream=stream, env=env)  # type: ignore[arg-type]
        log = logging.getLogger("bridge.j")
        log.info("up")
        log.warning("careful")
        log.debug("detail")
    lines = target.read_text().splitlines()
    assert [line[:3] for line in lines] == ["<6>", "<4>", "<7>"]
    assert json.loads(lines[1][3:])["message"] == "careful"
    configure_logging("INFO", "json", stream=io.StringIO(), env={"JOURNAL_STREAM": "1:2"})


def test_reconfiguring_replaces_our_handler() -> None:
    configure_logging("INFO", "json", stream=io.StringIO(), env={})
    configure_logging("INFO", "text", stream=io.StringIO(), env={})
    ours = [h for h in logging.getLogger().handlers if h.get_name() == "codedeck-bridge"]
    assert len(ours) == 1 and isinstance(ours[0].formatter, TextFormatter)


# --- redaction ----------------------------------------------------------------------------------

SECRETS = {
    "nsec": KEY.nsec,
    "anthropic": "sk-ant-api03-AbCdEf0123456789_-xyz",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "assignment": "ANTHROPIC_AUTH_TOKEN=tok_live_0123456789",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_patterns_mask_secret_looking_tokens(name: str) -> None:
    text = f"before {SECRETS[name]} after"
    masked = redact(text)
    assert REDACTED in masked and masked.startswith("before ") and masked.endswith(" after")
    secret_part = SECRETS[name].split()[-1].split("=")[-1]
    assert secret_part not in masked


def test_registered_key_is_masked_in_hex_both_cases_and_nsec() -> None:
    register_secret(KEY.secret)
    for form in (KEY.secret_hex, KEY.secret_hex.upper(), KEY.nsec):
        assert redact(f"key={form}!") == f"key={REDACTED}!"
    # Public values and event ids (64 hex too) stay readable.
    assert redact(f"{KEY.public_hex} {EVENT_ID}") == f"{KEY.public_hex} {EVENT_ID}"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_secret_reaches_either_format(fmt: str) -> None:
    out = io.StringIO()
    configure_logging("DEBUG", fmt, stream=out, secrets=[KEY.secret], env={})
    log = logging.getLogger("bridge.secret")
    log.info("arg %s", KEY.secret_hex)
    log.info("extra", extra={"token": SECRETS["bearer"], "key": KEY.nsec})
    log.warning("header Authorization: %s", SECRETS["bearer"])
    try:
        raise RuntimeError(f"failed with {SECRETS['anthropic']} and {KEY.secret_hex}")
    except RuntimeError:
        log.exception("crash")
    log.info("%s", SECRETS["assignment"])
    text = out.getvalue()
    for leaked in (
        KEY.secret_hex,
        KEY.nsec,
        "eyJhbGciOiJIUzI1NiJ9",
        "AbCdEf0123456789",
        "tok_live",
    ):
        assert leaked not in text
    assert text.count(REDACTED) >= 7


def test_filter_survives_a_broken_format_string() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%d items", ("many",), None)
    assert RedactionFilter().filter(record)
    assert "unformattable" in record.getMessage()
    assert JsonFormatter().format(record)


# --- the daemon's own output --------------------------------------------------------------------
