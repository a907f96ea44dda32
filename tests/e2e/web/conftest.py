"""Fixtures of the browser tier: the bridge serving CodeDeck Web, and Chromium to open it.

The bridge runs as users run it for a phone without the app: no relay configured, so it serves
its embedded relay, whose port also answers plain HTTP with the web app (same origin as the
websocket). The port is chosen here and given on the command line, so a restart on the same home
(after a ``kill -9``) listens where the page's websocket reconnects.

Without node, Chromium or ``web/node_modules`` the tier is skipped with how to install them;
in CI (``CI`` set) it fails instead, so a machine that lost its browser cannot pass by skipping.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from bridge.webclient import STATIC_DIR
from tests.support.browser import Browser, missing_browser, need
from tests.support.daemon import DaemonProcess, kill_hosts_under

Shoot = Callable[[Browser, str], Awaitable[Path]]


def need_browser() -> None:
    """Skip (locally) or fail (in CI) when the browser tier cannot run here."""
    need(missing_browser())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(autouse=True)
def no_host_left_behind(tmp_path: Path) -> Iterator[None]:
    """Session hosts outlive a killed daemon by design; a test leaves none running."""
    yield
    kill_hosts_under(tmp_path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def web_daemon(
    tmp_path: Path,
    workspace: Path,
    env: dict[str, str] | None = None,
    *,
    name: str = "home",
    machine: str = "testbox",
) -> DaemonProcess:
    """A daemon (not started) serving its embedded relay and the web app on a port of its own."""
    port = free_port()
    home = tmp_path / name
    home.mkdir(mode=0o700, exist_ok=True)
    return DaemonProcess(
        home,
        [],
        workspace,
        machine=machine,
        extra_args=["--embedded-relay", f"127.0.0.1:{port}"],
        env={"CODEDECK_TRANSCRIPT_KEEP_LAST": "0", **(env or {})},
    )


@pytest.fixture
async def daemon(tmp_path: Path, workspace: Path) -> AsyncIterator[DaemonProcess]:
    """The bridge with the scripted agent, serving the web app (see :func:`base_url`)."""
    need_browser()
    async with web_daemon(tmp_path, workspace) as running:
        yield running
    running.kill()


@pytest.fixture
async def browser(tmp_path: Path, shoot: Shoot) -> AsyncIterator[Browser]:
    """Chromium at phone size (375×812) with a fresh profile; its last screen is kept."""
    need_browser()
    async with Browser(tmp_path / "profile") as running:
        try:
            yield running
        finally:
            # A dead page must not hide the test's own failure. What the page logged is printed
            # (pytest shows it for a failed test only) beside its last screen.
            with contextlib.suppress(Exception):
                await shoot(running, "last")
            with contextlib.suppress(Exception):
                print(f"--- the page's logs ---\n{(await running.logs()).render()}")


@pytest.fixture
def shoot(request: pytest.FixtureRequest, tmp_path: Path) -> Shoot:
    """``await shoot(browser, name)``: a screenshot in ``<tmp_path>/shots/<name>.png``, also
    copied under ``$CODEDECK_SHOTS/<test>/`` when that is set (to look at after a run)."""
    folder = tmp_path / "shots"
    copy_to = os.environ.get("CODEDECK_SHOTS")
    test_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)

    async def take(browser: Browser, name: str) -> Path:
        path = await browser.screenshot(folder / f"{name}.png")
        if copy_to:
            target = Path(copy_to) / test_name
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / path.name)
        return path

    return take


@pytest.fixture
def static_host() -> Iterator[str]:
    """The shipped app's files served by a plain static server on 127.0.0.1 (its base URL):
    CodeDeck Web hosted apart from the bridge, as ``deploy/web/`` describes."""
    handler = functools.partial(_QuietFiles, directory=str(STATIC_DIR))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass
