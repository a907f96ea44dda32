"""deploy/relay without Docker: the files parse and agree with each other and with the tests.

Docker is not available where these tests run, so the image is never built here (the README says
so). What is checked: the compose file parses and wires the services to the same volume, paths
and ports as strfry.conf and the Dockerfile; the plugin command is the one the plugin tests run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.support.strfry_plugin_policy import (
    CONTAINER_CONFIG,
    CONTAINER_REGISTRY,
    STRFRY_CONF,
    plugin_argv_from_conf,
)

DEPLOY = STRFRY_CONF.parent
yaml = pytest.importorskip("yaml", reason="PyYAML parses docker-compose.yml")


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def _conf_value(key: str) -> str:
    match = re.search(rf"^\s*{re.escape(key)}\s*=\s*(.+?)\s*$", STRFRY_CONF.read_text(), re.M)
    assert match, key
    return match.group(1).strip('"')


def test_compose_services_share_the_registry() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"relay", "admin"}
    relay, admin = services["relay"], services["admin"]
    assert relay["build"] == {"context": "../..", "dockerfile": "deploy/relay/Dockerfile"}
    assert admin["image"] == relay["image"]
    registry_dir = str(Path(CONTAINER_REGISTRY).parent)
    assert f"registry:{registry_dir}" in relay["volumes"]
    assert f"registry:{registry_dir}" in admin["volumes"]
    assert set(compose["volumes"]) == {"strfry-db", "registry"}
    db_dir = _conf_value("db").rstrip("/")
    assert f"strfry-db:{db_dir}" in relay["volumes"]


def test_compose_ports_are_loopback_only() -> None:
    services = _compose()["services"]
    port = _conf_value("port")
    assert services["relay"]["ports"] == [f"127.0.0.1:{port}:{port}"]
    assert services["admin"]["ports"] == ["127.0.0.1:8089:8089"]


def test_compose_admin_command() -> None:
    compose = _compose()
    command = compose["services"]["admin"]["command"]
    assert command[:2] == ["codedeck-relaypolicy", "serve-admin"]
    args = dict(zip(command[2::2], command[3::2], strict=True))
    assert args == {
        "--registry": CONTAINER_REGISTRY,
        "--token-file": "/run/secrets/admin_token",
        "--bind": "0.0.0.0:8089",
    }
    assert compose["services"]["admin"]["secrets"] == ["admin_token"]
    assert compose["secrets"]["admin_token"] == {"file": "./admin_token"}
    relay_command = compose["services"]["relay"]["command"]
    assert relay_command == ["strfry", "--config=/etc/strfry.conf", "relay"]


def test_strfry_conf_settings() -> None:
    assert _conf_value("maxEventSize") == "65536"
    assert _conf_value("realIpHeader") == "x-real-ip"
    assert _conf_value("restrictedReadKinds") == "4, 1059"
    assert _conf_value("timeoutSeconds") == "10"
    # strfry warns at every start unless an ephemeral event it accepts outlives its acceptance.
    rejected_after = int(_conf_value("rejectEphemeralEventsOlderThanSeconds"))
    assert rejected_after < int(_conf_value("ephemeralEventsLifetimeSeconds"))
    # The plugin line holds no shell metacharacters beyond plain words: sh -c runs it as is.
    argv = plugin_argv_from_conf()
    assert shlex.join(argv) == _conf_value("plugin")


def test_dockerfile_installs_what_strfry_conf_names() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "COPY deploy/relay/strfry.conf /etc/strfry.conf" in dockerfile
    assert f"COPY deploy/relay/relaypolicy.toml {CONTAINER_CONFIG}" in dockerfile
    assert f"CODEDECK_RELAY_REGISTRY={CONTAINER_REGISTRY}" in dockerfile
    assert "--uid 10001" in dockerfile  # the README's chown of the token file
    match = re.search(r"ARG STRFRY_COMMIT=(\w+)", dockerfile)
    assert match and match.group(1) in STRFRY_CONF.read_text()
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    for needed in ("!deploy/relay/strfry.conf", "!deploy/relay/relaypolicy.toml", "!relaypolicy/"):
        assert needed in ignore


def test_readme_documents_the_plugin_command_and_what_was_not_run() -> None:
    readme = (DEPLOY / "README.md").read_text()
    assert "none of\nthe container setup has been run" in readme
    assert "x-real-ip" in readme.lower()
    assert "restrictedReadKinds" in readme
