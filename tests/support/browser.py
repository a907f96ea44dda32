"""A real browser for the tests: Debian's Chromium through :file:`browser_driver.mjs`.

The web client (CodeDeck Web, served by the bridge) is tested the way a phone's browser runs it:
the tests open the bridge's own URL in Chromium, click by the ``data-testid`` contract and read
what the page shows, while the test itself stays in Python, so it can kill -9 the bridge, read the
bridge's store and compare. The driver is a small Node program (playwright-core from
``web/node_modules``, pinned by the front end's lockfile; no browser download): one JSON command
per line on its stdin, one JSON answer per line on its stdout. :class:`Browser` is its client.

Every call has a timeout, enforced twice: by Playwright inside the driver (the answer is then an
error naming what it waited for) and here (a driver that stops answering is killed). A failed
call raises :class:`BrowserError` with the driver's error and everything the page logged (console,
uncaught errors, dialogs), which is usually what explains it.

One :class:`Browser` is one persistent profile in a fresh directory: IndexedDB survives a reload
within the test, and no test sees another's keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

__all__ = [
    "DRIVER",
    "WEB_DIR",
    "Browser",
    "BrowserError",
    "PageLogs",
    "chromium_path",
    "missing_browser",
    "missing_web_tools",
    "need",
]

REPO = Path(__file__).resolve().parents[2]
WEB_DIR = REPO / "web"
DRIVER = Path(__file__).resolve().parent / "browser_driver.mjs"
_START_TIMEOUT = 60.0
_SLACK = 5.0
"""Seconds this side waits past a command's own timeout before it gives up on the driver."""
_LINE_LIMIT = 64 * 1024 * 1024


def chromium_path() -> str:
    """The browser the driver starts: ``$CHROMIUM``, else Debian's ``/usr/bin/chromium``."""
    return os.environ.get("CHROMIUM") or "/usr/bin/chromium"


def missing_web_tools(*packages: str) -> str | None:
    """Why node or the front end's npm `packages` are not here (with how to fix it), or None."""
    if shutil.which("node") is None:
        return "node is not installed (apt-get install nodejs npm)"
    for package in packages:
        if not (WEB_DIR / "node_modules" / package / "package.json").is_file():
            return f"web/node_modules has no {package} (cd web && npm ci; make test does it)"
    return None


def missing_browser() -> str | None:
    """Why the browser tier cannot run here (with how to fix it), or None when it can."""
    if not Path(chromium_path()).is_file():
        return f"no Chromium at {chromium_path()} (apt-get install chromium, or set CHROMIUM)"
    return missing_web_tools("playwright-core")


def need(reason: str | None) -> None:
    """Skip the test with `reason` (how to install what is missing), or fail it in CI.

    Locally a missing browser or node is the machine's business, as a missing bwrap is; in CI
    (``CI`` set, where ``.ci/run`` installs them) it means the tier silently stopped running, so
    it fails loudly instead.
    """
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"this tier must run in CI: {reason}", pytrace=False)
    pytest.skip(f"needs {reason}")


class BrowserError(AssertionError):
    """A browser command failed; the message holds the driver's error and the page's logs."""


@dataclass(frozen=True, slots=True)
class ConsoleMessage:
    type: str
    text: str
    url: str


@dataclass(frozen=True, slots=True)
class PageLogs:
    """What the page said since the browser started (or since the last ``logs(clear=True)``)."""

    console: tuple[ConsoleMessage, ...]
    errors: tuple[str, ...]
    """Uncaught exceptions and unhandled rejections of the page."""
    dialogs: tuple[dict[str, str], ...]
    """alert / confirm / prompt / beforeunload dialogs (each dismissed at once)."""

    def render(self) -> str:
        lines = [
            f"console.{m.type}: {m.text}" + (f"  ({m.url})" if m.url else "") for m in self.console
        ]
        lines += [f"page error: {error}" for error in self.errors]
        lines += [f"dialog {d.get('type')}: {d.get('message')}" for d in self.dialogs]
        return "\n".join(lines) if lines else "(the page logged nothing)"


class Browser:
    """Chromium with one fresh profile; use as ``async with Browser(profile_dir) as browser``."""

    def __init__(self, profile: Path, *, log: Path | None = None) -> None:
        self.profile = profile
        self.log = log if log is not None else profile.parent / f"{profile.name}-driver.log"
        self.version: str | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        reason = missing_browser()
        if reason is not None:
            raise BrowserError(f"the browser cannot start: {reason}")
        self.profile.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CHROMIUM": chromium_path(), "CDB_WEB_DIR": str(WEB_DIR)}
        with self.log.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                "node", str(DRIVER), str(self.profile),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                env=env, limit=_LINE_LIMIT, start_new_session=True,
            )  # fmt: skip
        try:
            ready = await self._read(0, _START_TIMEOUT)
        except BaseException:
            await self._kill()
            raise
        if not ready.get("ok"):
            await self._kill()
            raise BrowserError(f"the browser did not start: {ready.get('error')}")
        value = ready.get("value") or {}
        self.version = value.get("version") if isinstance(value, dict) else None

    async def stop(self) -> None:
        """Close the browser (the profile is kept for the test to look at)."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(Exception):
                await self.call("close", timeout=10)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                await self._kill()
        self._proc = None

    async def _kill(self) -> None:
        """SIGKILL the driver's process group (node and the Chromium it started)."""
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 10)
        self._proc = None

    async def __aenter__(self) -> Browser:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- the line protocol --------------------------------------------------------------------

    async def _read(self, want: int, timeout: float) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout)
            if not line:
                raise BrowserError(f"the browser driver exited ({self._log_tail()})")
            reply = json.loads(line)
            if not isinstance(reply, dict):
                raise BrowserError(f"the browser driver answered {line!r}")
            if reply.get("id") == want:
                return reply

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "no driver log"
        return "driver stderr: " + ("\n".join(text.splitlines()[-lines:]) or "(empty)")

    async def call(self, cmd: str, *, timeout: float = 10.0, **args: Any) -> Any:
        """Run one driver command; its value, or :class:`BrowserError` with the page's logs."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise BrowserError("the browser is not running")
        async with self._lock:
            ident = next(self._ids)
            message = {"id": ident, "cmd": cmd, "timeout": int(timeout * 1000), **args}
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            try:
                await proc.stdin.drain()
                reply = await self._read(ident, timeout + _SLACK)
            except TimeoutError:
                await self._kill()
                raise BrowserError(
                    f"{cmd} {args}: the driver did not answer in {timeout + _SLACK:.0f} s; killed"
                ) from None
        if reply.get("ok"):
            return reply.get("value")
        error = str(reply.get("error"))
        if cmd in ("logs", "close"):
            raise BrowserError(f"{cmd}: {error}")
        try:
            logs = (await self.logs()).render()
        except BrowserError as failed:
            logs = f"(no logs: {failed})"
        raise BrowserError(f"{cmd} {args}: {error}\n--- the page's logs ---\n{logs}")

    # --- typed commands -----------------------------------------------------------------------

    async def goto(self, url: str, *, timeout: float = 20.0) -> str:
        return str(await self.call("goto", url=url, timeout=timeout))

    async def reload(self, *, timeout: float = 20.0) -> str:
        return str(await self.call("reload", timeout=timeout))

    async def url(self) -> str:
        return str(await self.call("url"))

    async def click(self, selector: str, *, text: str | None = None, timeout: float = 10.0) -> None:
        await self.call("click", selector=selector, timeout=timeout, **_text(text))

    async def fill(self, selector: str, value: str, *, timeout: float = 10.0) -> None:
        await self.call("fill", selector=selector, value=value, timeout=timeout)

    async def press(self, selector: str, key: str, *, timeout: float = 10.0) -> None:
        await self.call("press", selector=selector, key=key, timeout=timeout)

    async def select(self, selector: str, value: str, *, timeout: float = 10.0) -> list[str]:
        return list(await self.call("select", selector=selector, value=value, timeout=timeout))

    async def set_files(self, selector: str, files: list[Path], *, timeout: float = 10.0) -> None:
        """Choose `files` in the file input `selector` (as the user's file picker would)."""
        await self.call(
            "setFiles", selector=selector, files=[str(f) for f in files], timeout=timeout
        )

    async def wait_for(
        self,
        selector: str,
        *,
        state: str = "visible",
        text: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        """Until the first match of `selector` (containing `text`) is in `state`
        (``visible`` / ``hidden`` / ``attached`` / ``detached``)."""
        await self.call("waitFor", selector=selector, state=state, timeout=timeout, **_text(text))

    async def wait_for_count(self, selector: str, count: int, *, timeout: float = 10.0) -> int:
        return int(await self.call("waitForCount", selector=selector, count=count, timeout=timeout))

    async def count(self, selector: str, *, text: str | None = None) -> int:
        return int(await self.call("count", selector=selector, **_text(text)))

    async def attr(self, selector: str, name: str, *, timeout: float = 10.0) -> str | None:
        value = await self.call("attr", selector=selector, name=name, timeout=timeout)
        return None if value is None else str(value)

    async def attrs(self, selector: str, name: str) -> list[str | None]:
        """`name` of every element matching `selector`, in document order."""
        return [
            None if v is None else str(v)
            for v in await self.call("attrs", selector=selector, name=name)
        ]

    async def text(self, selector: str, *, timeout: float = 10.0) -> str:
        return str(await self.call("text", selector=selector, timeout=timeout))

    async def texts(self, selector: str) -> list[str]:
        return [str(t) for t in await self.call("texts", selector=selector)]

    async def visible(self, selector: str) -> bool:
        return bool(await self.call("visible", selector=selector))

    async def eval(self, expression: str, *, timeout: float = 10.0) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable)."""
        return await self.call("eval", expression=expression, timeout=timeout)

    async def wait_for_function(self, expression: str, *, timeout: float = 10.0) -> None:
        """Until the page's JavaScript `expression` is truthy."""
        await self.call("waitForFunction", expression=expression, timeout=timeout)

    async def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        await self.call("screenshot", path=str(path), fullPage=full_page, timeout=20.0)
        return path

    async def set_viewport(self, width: int, height: int) -> None:
        await self.call("setViewport", width=width, height=height)

    async def set_offline(self, offline: bool) -> None:
        await self.call("setOffline", offline=offline)

    async def accept_dialogs(self, accept: bool = True) -> None:
        """Answer the page's next dialogs with OK (a confirm() the user agrees to), or dismiss."""
        await self.call("dialogs", accept=accept)

    async def logs(self, *, clear: bool = False) -> PageLogs:
        value = await self.call("logs", clear=clear)
        return PageLogs(
            console=tuple(
                ConsoleMessage(str(m.get("type")), str(m.get("text")), str(m.get("url") or ""))
                for m in value["console"]
            ),
            errors=tuple(str(e) for e in value["errors"]),
            dialogs=tuple({k: str(v) for k, v in d.items()} for d in value["dialogs"]),
        )


def _text(text: str | None) -> dict[str, Any]:
    return {} if text is None else {"text": text}
