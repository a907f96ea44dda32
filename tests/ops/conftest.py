"""Resources for the operations tests: the CLI in this process and a fake ``NOTIFY_SOCKET``."""

from __future__ import annotations

import functools
import socket
from collections.abc import Iterator

import pytest

from tests.control.fake_handler import short_home
from tests.ops.support import Cli, invoke


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``main([...])`` in this process: ``cli(*args, **env)``."""
    return functools.partial(invoke, capsys, monkeypatch)


@pytest.fixture
def notify_socket() -> Iterator[tuple[str, socket.socket]]:
    with short_home() as directory:
        path = str(directory / "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        try:
            yield path, sock
        finally:
            sock.close()
