"""An image attached in CodeDeck Web reaches the session folder intact (chunked upload)."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

from tests.e2e.web.conftest import Shoot
from tests.e2e.web.steps import WAIT, create_session, pair, tid, wait_entries_match_store
from tests.support.browser import Browser
from tests.support.daemon import DaemonProcess


def png(width: int, height: int) -> bytes:
    """A valid PNG of random pixels (incompressible: the upload takes several chunks)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + os.urandom(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 1))
        + chunk(b"IEND", b"")
    )


async def test_an_attached_image_is_saved_in_the_session_folder(
    daemon: DaemonProcess, browser: Browser, shoot: Shoot, tmp_path: Path
) -> None:
    image = png(200, 200)
    picture = tmp_path / "photo.png"
    picture.write_bytes(image)
    bridge = await pair(browser, daemon)
    session = await create_session(browser, bridge)
    await browser.fill(tid("composer-input"), "what is in this picture?")
    await browser.set_files(tid("attach-image"), [picture])
    await browser.wait_for(tid("entry"), text="[Attached image: ", timeout=60)
    await browser.wait_for(tid("entry"), text="what is in this picture?", timeout=WAIT)
    await shoot(browser, "uploaded")
    saved = list((daemon.workspace / ".codedeck" / "uploads").iterdir())
    assert [path.read_bytes() for path in saved] == [image]
    await wait_entries_match_store(browser, daemon, session)
    logs = await browser.logs()
    assert not logs.errors, logs.render()
