"""The embedded relay's certificate and key settings: read from each layer, and every way they
can be wrong stops start-up with a message that says what is wrong and how to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.config import ConfigError, load_settings
from tests.support.tls import make_certificate


def tls_env(cert: Path | str, key: Path | str) -> dict[str, str]:
    return {"CODEDECK_EMBEDDED_RELAY_CERT": str(cert), "CODEDECK_EMBEDDED_RELAY_KEY": str(key)}


def test_a_certificate_and_its_key_from_the_environment_or_the_file(tmp_path: Path) -> None:
    made = make_certificate(tmp_path / "tls")
    settings = load_settings(flags={"home": str(tmp_path)}, env=tls_env(made.cert, made.key))
    assert (settings.embedded_relay_cert, settings.embedded_relay_key) == (made.cert, made.key)
    assert settings.origins["embedded_relay_cert"] == "env CODEDECK_EMBEDDED_RELAY_CERT"
    (tmp_path / "config.toml").write_text(
        f'embedded_relay_cert = "{made.cert}"\nembedded_relay_key = "{made.key}"\n'
    )
    from_file = load_settings(flags={"home": str(tmp_path)}, env={})
    assert from_file.embedded_relay_key == made.key
    assert from_file.origins["embedded_relay_key"] == f"file {tmp_path / 'config.toml'}"


def test_relative_paths_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_certificate(tmp_path / "tls")
    monkeypatch.chdir(tmp_path)
    settings = load_settings(
        flags={"home": str(tmp_path)}, env=tls_env("tls/relay.crt", "tls/relay.key")
    )
    assert settings.embedded_relay_cert == tmp_path / "tls" / "relay.crt"


def problem(home: Path, env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(flags={"home": str(home)}, env=env)
    return str(info.value)


def test_only_one_of_the_two_is_refused_either_way(tmp_path: Path) -> None:
    made = make_certificate(tmp_path / "tls")
    assert problem(tmp_path, {"CODEDECK_EMBEDDED_RELAY_CERT": str(made.cert)}) == (
        "embedded_relay_cert is set but embedded_relay_key is not: give its private key "
        "(CODEDECK_EMBEDDED_RELAY_KEY or embedded_relay_key in config.toml), or remove both to "
        "serve plain ws:// and http://"
    )
    assert problem(tmp_path, {"CODEDECK_EMBEDDED_RELAY_KEY": str(made.key)}) == (
        "embedded_relay_key is set but embedded_relay_cert is not: give the certificate it "
        "belongs to (CODEDECK_EMBEDDED_RELAY_CERT or embedded_relay_cert in config.toml), or "
        "remove both to serve plain ws:// and http://"
    )


def test_a_missing_file_or_a_folder_is_named_with_the_fix(tmp_path: Path) -> None:
    made = make_certificate(tmp_path / "tls")
    missing = tmp_path / "nope.crt"
    assert problem(tmp_path, tls_env(missing, made.key)) == (
        f"embedded_relay_cert (env CODEDECK_EMBEDDED_RELAY_CERT): {missing} does not exist; "
        "give the path of the certificate (PEM)"
    )
    assert problem(tmp_path, tls_env(made.cert, tmp_path)) == (
        f"embedded_relay_key (env CODEDECK_EMBEDDED_RELAY_KEY): {tmp_path} is not a file; "
        "give the path of the certificate's private key (PEM)"
    )


def test_an_unreadable_key_is_named(tmp_path: Path) -> None:
    made = make_certificate(tmp_path / "tls")
    made.key.chmod(0)
    try:
        readable = made.key.open("rb")  # root reads anything: nothing to test then
    except PermissionError:
        pass
    else:
        readable.close()
        pytest.skip("running as root: every file is readable")
    message = problem(tmp_path, tls_env(made.cert, made.key))
    assert message.startswith(
        f"embedded_relay_key (env CODEDECK_EMBEDDED_RELAY_KEY): cannot read {made.key} (Permission denied)"
    )


def test_a_key_that_does_not_match_the_certificate_is_refused(tmp_path: Path) -> None:
    one = make_certificate(tmp_path / "one")
    other = make_certificate(tmp_path / "other")
    assert problem(tmp_path, tls_env(one.cert, other.key)) == (
        f"embedded_relay_key (env CODEDECK_EMBEDDED_RELAY_KEY): {other.key} does not match the "
        f"certificate {one.cert}; give the key the certificate was made for"
    )


def test_swapped_files_and_an_encrypted_key_are_named(tmp_path: Path) -> None:
    made = make_certificate(tmp_path / "tls")
    assert "is not a PEM certificate" in problem(tmp_path, tls_env(made.key, made.cert))
    made.cert.chmod(0o600)
    locked = make_certificate(tmp_path / "locked", passphrase=b"secret")
    message = problem(tmp_path, tls_env(locked.cert, locked.key))
    assert "is encrypted with a passphrase, which the bridge cannot type" in message
    assert "secret" not in message


def test_a_key_every_user_can_read_is_refused(tmp_path: Path) -> None:
    made = make_certificate(tmp_path / "tls")
    made.key.chmod(0o644)
    assert problem(tmp_path, tls_env(made.cert, made.key)) == (
        f"embedded_relay_key (env CODEDECK_EMBEDDED_RELAY_KEY): {made.key} is readable by every "
        f"user of this machine; restrict it: chmod 600 {made.key}"
    )
