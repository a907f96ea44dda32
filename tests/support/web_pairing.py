"""The web app's addresses for a test bridge: its base URL, its pairing link, a test id selector.

Shared by the browser tier (``tests/e2e/web``) and the browser benchmark: both open the bridge's
own web app in Chromium and select by the ``data-testid`` contract of the UI.
"""

from __future__ import annotations

from urllib.parse import quote

from tests.support.browser import Browser
from tests.support.daemon import DaemonProcess
from tests.support.phone_pairing import parse_pairing_url

__all__ = ["base_url", "open_pairing_link", "pairing_link", "tid", "web_link"]


def tid(name: str, **attrs: str) -> str:
    """The CSS selector of a test id: ``tid("entry", seq="3")`` is
    ``[data-testid="entry"][data-seq="3"]`` (``_`` in a name becomes ``-``)."""
    selector = f'[data-testid="{name}"]'
    for key, value in attrs.items():
        selector += f'[data-{key.replace("_", "-")}="{value}"]'
    return selector


def base_url(daemon: DaemonProcess) -> str:
    """Where the daemon's embedded relay serves the web app (``http://127.0.0.1:PORT/``)."""
    listen = daemon.extra_args[daemon.extra_args.index("--embedded-relay") + 1]
    return f"http://{listen}/"


def web_link(base: str, codedeck_url: str) -> str:
    """The web pairing link of the shared format, built from a ``codedeck://pair`` URL:
    ``<base>#pair=<npub>&relays=<each percent-encoded, comma-joined>&machine=…&token=…``."""
    info = parse_pairing_url(codedeck_url)
    relays = ",".join(quote(relay, safe="") for relay in info.relays)
    fragment = (
        f"pair={info.npub}&relays={relays}&machine={quote(info.machine, safe='')}"
        f"&token={quote(info.token, safe='')}"
    )
    return f"{base}#{fragment}"


async def pairing_link(daemon: DaemonProcess) -> tuple[str, str]:
    """A fresh pairing window's web link (``pair.open``'s ``webUrl``, the link ``pair`` prints)
    and the bridge's pubkey (hex)."""
    opened = await daemon.call("pair.open", duration=600)
    web = opened.get("webUrl")
    if not isinstance(web, str) or not web:
        raise AssertionError(f"pair.open gave no webUrl: {sorted(opened)}")
    return web, parse_pairing_url(opened["url"]).bridge_pubkey


async def open_pairing_link(
    browser: Browser, link: str, bridge: str, label: str, *, timeout: float, navigate: bool = True
) -> None:
    """Open `link` and return once the page lists `bridge` as paired and online.

    The page may ask for this device's label first (``pair-screen``: ``pair-label``,
    ``pair-submit``) or pair straight away; both are the user's path. ``navigate=False``: the
    caller has opened the link already (to time the page's load on its own).
    """
    if navigate:
        await browser.goto(link)
    bridge_item = tid("bridge-item", bridge_id=bridge)
    await browser.wait_for(f"{bridge_item}, {tid('pair-submit')}", timeout=timeout)
    if await browser.count(bridge_item) == 0 and await browser.visible(tid("pair-submit")):
        if await browser.count(tid("pair-label")):
            await browser.fill(tid("pair-label"), label)
        await browser.click(tid("pair-submit"))
    await browser.wait_for(bridge_item, timeout=timeout)
    await browser.wait_for(f"{bridge_item} {tid('presence', presence='online')}", timeout=timeout)
