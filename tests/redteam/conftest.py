"""Fixtures of the red-team tier: the mock model and the attacker's web server per module."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.differential.web import ScriptServer, serve_scripts
from tests.support.daemon import kill_hosts_under
from tests.support.mock_anthropic import MockAnthropic


@pytest.fixture(scope="module")
def mock_api() -> Iterator[MockAnthropic]:
    with MockAnthropic() as mock:
        yield mock


@pytest.fixture(scope="module")
def script_server() -> Iterator[ScriptServer]:
    with serve_scripts() as server:
        yield server


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A directory with a short path for the throwaway home: a session host's socket lives
    under the bridge home, and a socket path has at most 107 bytes (pytest's are too long).

    Session hosts outlive a killed daemon by design; a test leaves none running.
    """
    root = Path(tempfile.mkdtemp(prefix="rt-"))
    try:
        yield root
    finally:
        kill_hosts_under(root)
        shutil.rmtree(root, ignore_errors=True)
