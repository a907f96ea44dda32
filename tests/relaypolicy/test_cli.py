"""``codedeck-relaypolicy``: subcommands, exit codes, one-line errors, no tracebacks."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

from bridge.nostr.keys import Keypair
from relaypolicy.cli import REGISTRY_ENV, build_parser, main
from store.registry import RegistryStore

BRIDGE = Keypair.generate()
PHONE = Keypair.generate()


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_register_list_unregister(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = str(tmp_path / "registry.db")
    status, out, _ = run(
        ["register", BRIDGE.npub, "--label", "laptop", "--registry", registry], capsys
    )
    assert status == 0
    assert out == f"registered: {BRIDGE.npub} ({BRIDGE.public_hex})\n"
    status, out, _ = run(["register", BRIDGE.public_hex.upper(), "--registry", registry], capsys)
    assert (status, out) == (0, f"already registered: {BRIDGE.npub} ({BRIDGE.public_hex})\n")
    run(["register", PHONE.public_hex, "--registry", registry], capsys)

    status, out, err = run(["list", "--registry", registry], capsys)
    assert status == 0
    lines = {line[:64]: line for line in out.splitlines()}  # same second: any order
    assert set(lines) == {BRIDGE.public_hex, PHONE.public_hex}
    assert lines[BRIDGE.public_hex].endswith("  laptop")
    assert err == "2 registered\n"

    status, out, _ = run(["list", "--json", "--registry", registry], capsys)
    records = sorted((json.loads(line) for line in out.splitlines()), key=lambda r: r["label"])
    assert records[1] == {
        "pubkey": BRIDGE.public_hex,
        "npub": BRIDGE.npub,
        "label": "laptop",
        "registered_at": records[1]["registered_at"],
        "pairing_until": None,
    }

    status, out, _ = run(["unregister", BRIDGE.npub, "--registry", registry], capsys)
    assert (status, out) == (0, f"unregistered: {BRIDGE.npub} ({BRIDGE.public_hex})\n")
    status, out, _ = run(["unregister", BRIDGE.npub, "--registry", registry], capsys)
    assert (status, out) == (0, f"was not registered: {BRIDGE.npub} ({BRIDGE.public_hex})\n")
    with RegistryStore.open(registry) as store:
        assert [row.pubkey for row in store.registrations()] == [PHONE.public_hex]


def test_list_shows_open_pairing_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = tmp_path / "registry.db"
    with RegistryStore.open(registry) as store:
        store.register(BRIDGE.public_hex, now=1)
        store.set_pairing_window(BRIDGE.public_hex, int(time.time()) + 600, now=int(time.time()))
    status, out, _ = run(["list", "--registry", str(registry)], capsys)
    assert status == 0 and "pairing until" in out


def test_registry_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "env.db"))
    status, _, _ = run(["register", PHONE.public_hex], capsys)
    assert status == 0
    assert (tmp_path / "env.db").exists()


@pytest.mark.parametrize(
    "value",
    ["nope", "ab" * 31, PHONE.nsec, "npub1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq"],
    ids=["word", "short-hex", "a-secret-key", "bad-checksum"],
)
def test_bad_pubkeys_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    status, out, err = run(["register", value, "--registry", str(tmp_path / "r.db")], capsys)
    assert status == 2
    assert out == ""
    assert err.startswith("codedeck-relaypolicy: error: invalid pubkey")
    assert err.count("\n") == 1
    assert PHONE.nsec not in err  # a secret pasted by mistake is not echoed back


def test_unusable_registry_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"x" * 200)
    status, out, err = run(["list", "--registry", str(garbage)], capsys)
    assert status == 1
    assert out == ""
    assert err.startswith("codedeck-relaypolicy: ") and "not a valid SQLite database" in err
    assert err.count("\n") == 1


def test_missing_arguments_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main([])
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        main(["serve-admin", "--registry", "r.db"])
    assert caught.value.code == 2
    assert "--token-file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["register", PHONE.public_hex], ["unregister", PHONE.npub], ["list"], ["plugin"]],
)
def test_no_registry_anywhere_is_one_line_naming_both_ways(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    status, out, err = run(argv, capsys)
    assert status == 2
    assert out == ""
    assert err == (
        f"codedeck-relaypolicy: error: no registry: pass --registry PATH or set {REGISTRY_ENV}\n"
    )


def test_the_environment_is_read_when_the_command_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    parser = build_parser()
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "late.db"))
    monkeypatch.setattr("relaypolicy.cli.build_parser", lambda: parser)
    status, out, _ = run(["register", BRIDGE.npub, "--label", "laptop"], capsys)
    assert status == 0 and out.startswith("registered: ")
    status, out, _ = run(["list"], capsys)
    assert status == 0 and BRIDGE.public_hex in out and "laptop" in out


def test_the_flag_wins_over_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "env.db"))
    status, _, _ = run(["register", PHONE.npub, "--registry", str(tmp_path / "flag.db")], capsys)
    assert status == 0
    assert (tmp_path / "flag.db").exists() and not (tmp_path / "env.db").exists()


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (choices,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(choices.choices)


@pytest.mark.parametrize("command", ["plugin", "register", "unregister", "list", "serve-admin"])
def test_every_option_has_help(command: str) -> None:
    parser = _subcommands()[command]
    missing = [
        action.dest
        for action in parser._actions
        if not action.help or action.help == argparse.SUPPRESS
    ]
    assert missing == []
    assert parser.description


@pytest.mark.parametrize("command", ["plugin", "register", "unregister", "list", "serve-admin"])
def test_help_offers_the_environment_as_the_registry_default(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    text = " ".join(_subcommands()[command].format_help().split())
    assert "[--registry PATH]" in text  # optional in the usage line
    assert f"default: ${REGISTRY_ENV}" in text


def test_plugin_with_a_broken_config_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[rate_limits.nope]\n")
    status, _, err = run(
        ["plugin", "--registry", str(tmp_path / "r.db"), "--config", str(config)], capsys
    )
    assert status == 1
    assert "unknown limit(s) nope" in err.splitlines()[-1]


def test_help_mentions_every_subcommand() -> None:
    text = build_parser().format_help()
    for command in ("plugin", "register", "unregister", "list", "serve-admin"):
        assert command in text
