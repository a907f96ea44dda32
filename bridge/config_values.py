"""The parsers of setting values, for :data:`bridge.config.SETTINGS`.

Each takes what a layer gave (a flag's value, a variable's string, a TOML value) and the text
``"<name> (<origin>)"``, and returns the field's value or raises :class:`ConfigError` saying what
is wrong and how to fix it. They live apart from the table so that the table reads as the list
of settings, and these as the rules each value must meet.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "ConfigError",
    "admin_api_url",
    "as_list",
    "as_path",
    "as_str",
    "check_tls",
    "on_off",
    "parse_host_port",
    "pem_file",
    "validate_relay_url",
    "web_page_url",
    "whole_number",
]


class ConfigError(ValueError):
    """A setting is invalid; the message names the setting, where it came from, and the fix."""


def validate_relay_url(url: str, *, setting: str = "relay") -> str:
    """Accept ``ws://`` and ``wss://`` URLs with a host; return it without a trailing slash."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ConfigError(
            f"{setting}: {url!r} is not a relay URL; use ws://host:port or wss://host "
            "(for example wss://relay.example.org)"
        )
    try:
        _ = parts.port
    except ValueError:
        raise ConfigError(f"{setting}: {url!r} has an invalid port") from None
    return url[:-1] if url.endswith("/") and parts.path == "/" else url


def parse_host_port(value: str, *, setting: str = "embedded_relay") -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``[v6]:PORT`` for IPv6) into a bindable address."""
    value = value.strip()
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{setting}: {value!r} must be HOST:PORT, for example 127.0.0.1:7777")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"{setting}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{setting}: port {port} is out of range (0-65535)")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise ConfigError(
                f"{setting}: {host!r} must be an IP address to bind "
                "(127.0.0.1 for this machine only, 0.0.0.0 to serve phones on the LAN)"
            ) from None
    return host, port


def as_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [item for item in (part.strip() for part in value.split(",")) if item]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    raise ConfigError(f"{where}: expected a list of strings")


def as_str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected a non-empty string")
    return value.strip()


def as_path(value: Any, where: str) -> Path:
    """A path as given (``~`` expanded, relative kept relative)."""
    return Path(os.path.expanduser(as_str(value, where)))


def admin_api_url(value: Any, where: str) -> str:
    """The relay's admin API: https, or http for this machine only."""
    url = as_str(value, where)
    parts = urlsplit(url)
    local = parts.hostname in ("localhost", "127.0.0.1", "::1")
    if not parts.hostname or not (parts.scheme == "https" or (parts.scheme == "http" and local)):
        raise ConfigError(
            f"{where}: {url!r} must be an https:// URL of the relay's admin API "
            "(http:// only for localhost)"
        )
    return url


def web_page_url(value: Any, where: str) -> str:
    """A page of CodeDeck Web hosted by the user: the root of an https origin (http only on this
    machine), since the app loads its files and its service worker from the origin's root."""
    url = as_str(value, where).strip()
    parts = urlsplit(url)
    local = parts.hostname in ("localhost", "127.0.0.1", "::1")
    fix = (
        "give the https:// address of the origin that serves bridge/webclient/static/ (deploy/web/)"
    )
    if not parts.hostname or not (parts.scheme == "https" or (parts.scheme == "http" and local)):
        raise ConfigError(
            f"{where}: {url!r} must be an https:// URL (http:// only for localhost); {fix}"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(
            f"{where}: {url!r} must be the root of its origin, with no path, query or fragment "
            f"(the app registers its service worker at /sw.js); {fix}"
        )
    return f"{parts.scheme}://{parts.netloc}/"


def pem_file(what: str) -> Callable[[Any, str], Path]:
    """A parser of a PEM file's path: it must be a regular file this process can read."""

    def parse(value: Any, where: str) -> Path:
        path = as_path(value, where).absolute()
        fix = f"give the path of the {what} (PEM)"
        if not path.exists():
            raise ConfigError(f"{where}: {path} does not exist; {fix}")
        if not path.is_file():
            raise ConfigError(f"{where}: {path} is not a file; {fix}")
        try:
            with path.open("rb") as fh:
                fh.read(1)
        except OSError as exc:
            raise ConfigError(
                f"{where}: cannot read {path} ({exc.strerror or exc}); let the user running the "
                f"bridge read it, or {fix} it can read"
            ) from None
        return path

    return parse


def check_tls(values: Mapping[str, Any], origins: Mapping[str, str]) -> None:
    """The embedded relay's certificate and key: both or neither, PEM, and a pair.

    The key must be unencrypted (the daemon cannot type a passphrase) and not readable by every
    user of the machine (it is a secret).
    """
    cert: Path | None = values["embedded_relay_cert"]
    key: Path | None = values["embedded_relay_key"]
    if cert is None and key is None:
        return
    if key is None or cert is None:
        given, missing = ("cert", "key") if key is None else ("key", "cert")
        what = "its private key" if key is None else "the certificate it belongs to"
        raise ConfigError(
            f"embedded_relay_{given} is set but embedded_relay_{missing} is not: give {what} "
            f"(CODEDECK_EMBEDDED_RELAY_{missing.upper()} or embedded_relay_{missing} in "
            "config.toml), or remove both to serve plain ws:// and http://"
        )
    from cryptography import x509  # only with TLS: every command loads this module
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    cert_where = f"embedded_relay_cert ({origins['embedded_relay_cert']})"
    key_where = f"embedded_relay_key ({origins['embedded_relay_key']})"
    try:
        certificate = x509.load_pem_x509_certificate(cert.read_bytes())
    except ValueError:
        raise ConfigError(
            f"{cert_where}: {cert} is not a PEM certificate (-----BEGIN CERTIFICATE-----); "
            "give the certificate file, not the key or a DER file"
        ) from None
    if key.stat().st_mode & stat.S_IROTH:
        raise ConfigError(
            f"{key_where}: {key} is readable by every user of this machine; "
            f"restrict it: chmod 600 {key}"
        )
    try:
        private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    except TypeError:
        raise ConfigError(
            f"{key_where}: {key} is encrypted with a passphrase, which the bridge cannot type; "
            f"give an unencrypted copy (openssl pkey -in {key} -out NEW.key; chmod 600 NEW.key)"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError(
            f"{key_where}: {key} is not a PEM private key (-----BEGIN PRIVATE KEY-----); "
            "give the certificate's key file"
        ) from None
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    encoding = serialization.Encoding.DER
    if private.public_key().public_bytes(encoding, public) != certificate.public_key().public_bytes(
        encoding, public
    ):
        raise ConfigError(
            f"{key_where}: {key} does not match the certificate {cert}; give the key the "
            "certificate was made for"
        )


def whole_number(*, minimum: int, of_what: str) -> Callable[[Any, str], int]:
    """A parser of integers (as numbers or strings, never booleans) of at least ``minimum``."""

    def parse(value: Any, where: str) -> int:
        number: int | None
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            number = None  # a flag, or 4.9 (never cut down to 4), inf or nan
        else:
            try:
                number = int(value)
            except (TypeError, ValueError, OverflowError):
                number = None
        if number is None or number < minimum:
            raise ConfigError(f"{where}: expected a whole number {of_what}")
        return number

    return parse


def on_off(value: Any, where: str) -> bool:
    """A switch: a TOML boolean, or true/false, on/off, yes/no, 1/0 as text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "on", "yes", "1"):
            return True
        if text in ("false", "off", "no", "0"):
            return False
    raise ConfigError(f"{where}: expected true or false")
