"""A hostile transcript is text: no script runs, no remote image loads, no dialog opens.

Every string the page shows was decrypted from a relay and may come from an agent that read a
poisoned file; the page renders it as text or sanitised Markdown. The payloads are sent as input,
so they appear twice: as the user's line and as the scripted agent's assistant text (``echo: …``,
rendered as Markdown). A local HTTP server on another port stands for a remote origin and counts
every request: a tracking image that loaded would be seen there, not only in the DOM.
"""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator

import pytest

from tests.e2e.web.conftest import Shoot
from tests.e2e.web.steps import WAIT, create_session, pair, send, tid, wait_entries_match_store
from tests.support.browser import Browser
from tests.support.daemon import DaemonProcess


class _Counting(http.server.BaseHTTPRequestHandler):
    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def remote() -> Iterator[tuple[str, list[str]]]:
    """A "remote origin" on 127.0.0.1 (its own port): its base URL and the paths it was asked for."""
    hits: list[str] = []
    handler = type("Handler", (_Counting,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", hits
    finally:
        server.shutdown()
        server.server_close()


def payloads(origin: str) -> list[str]:
    return [
        '<img src=x onerror="window.__pwned=1;alert(1)">',
        "<script>window.__pwned=2;alert(2)</script>",
        "[click me](javascript:window.__pwned=3)",
        f"![tracker]({origin}/pixel.png)",
        f'<img src="{origin}/raw.png">',
        '<iframe src="javascript:window.top.__pwned=4"></iframe>',
        '<a href="javascript:window.__pwned=5">raw link</a>',
        "<svg onload=\"window.__pwned=6\"><circle r='1'/></svg>",
        f'<link rel="stylesheet" href="{origin}/style.css">',
        "`" + "W" * 400 + "` " + "Z" * 400,
    ]


async def test_a_hostile_transcript_renders_as_text(
    daemon: DaemonProcess,
    browser: Browser,
    shoot: Shoot,
    remote: tuple[str, list[str]],
) -> None:
    origin, hits = remote
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    for payload in payloads(origin):
        await send(browser, payload)
        await browser.wait_for(tid("entry"), text="echo: ", timeout=WAIT)
    await send(browser, "the last one")
    await browser.wait_for(tid("entry"), text="echo: the last one", timeout=WAIT)
    await wait_entries_match_store(browser, daemon, session)
    # The markup is on screen as the characters typed.
    texts = "\n".join(await browser.texts(tid("entry")))
    assert "window.__pwned=2" in texts and "onerror" in texts
    await asyncio.sleep(1.0)  # time for a late onerror / image load to show itself
    await shoot(browser, "hostile")
    # Long unbroken markup wraps inside the phone's width.
    assert await browser.eval("document.documentElement.scrollWidth") <= 375

    assert await browser.eval("typeof window.__pwned") == "undefined"
    assert await browser.eval("window.top.__pwned === undefined")
    checks = {
        "script elements in the transcript": "script",
        "iframes": "iframe",
        "svg with handlers": "svg[onload]",
        "javascript: links": 'a[href^="javascript:" i]',
        "elements with an onerror": "[onerror]",
        "links to stylesheets from the transcript": "link[href*='style.css']",
    }
    transcript = tid("transcript")
    for what, selector in checks.items():
        found = await browser.count(f"{transcript} {selector}")
        assert found == 0, f"{found} {what} rendered from the transcript"
    remote_images = await browser.eval(
        "[...document.images].map(i => i.src).filter(s => !s.startsWith(location.origin + '/')"
        " && !s.startsWith('data:') && !s.startsWith('blob:'))"
    )
    assert remote_images == [], remote_images
    assert hits == [], f"the page fetched from the other origin: {hits}"
    logs = await browser.logs()
    assert not logs.dialogs, logs.render()
    assert not logs.errors, logs.render()
    # The page itself runs under the bridge's strict policy: no inline script, no remote image.
    policy = await browser.eval(
        "fetch(location.pathname).then(r => r.headers.get('content-security-policy'))"
    )
    assert isinstance(policy, str), policy
    directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
    assert directives["script-src"] == ["'self'"], policy
    assert directives["default-src"] == ["'none'"], policy
    assert not any(origin in value for value in policy.split()), policy
    csp = await browser.eval("window.__cdbCsp")
    assert csp == [], f"CSP violations: {csp}"
    violations = [m for m in logs.console if "Content Security Policy" in m.text]
    assert not violations, logs.render()
