"""Builders and checks for the image-upload integration tests (both ``upload-image`` shapes).

- Chunked: :func:`chunks_of` cuts one base64 encoding into pieces, :func:`chunk` builds a command.
- Blossom: :func:`seal` encrypts an image as a phone does (AES-256-GCM, the tag appended),
  :func:`blossom_upload` builds the command (every field overridable, to build refusals).
- What the session got: the scripted agent echoes each input (``echo: <text>``), so
  :func:`injected` lists the echoes of injected images and :func:`check_saved` checks the file one
  of them names (under ``<root>/.codedeck/uploads/``, a safe name, mode 0600, the right bytes).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bridge.protocol import UploadImageBlossomCommand, UploadImageChunkedCommand
from tests.support.phone import PhoneSimulator

__all__ = [
    "ATTACHED",
    "PNG",
    "Sealed",
    "blossom_upload",
    "check_saved",
    "chunk",
    "chunks_of",
    "injected",
    "saved_files",
    "seal",
    "uploads_dir",
    "wait_injected",
]

PNG: Final = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 12
"""An image as far as the bridge can tell (the PNG signature picks the extension)."""
ATTACHED: Final = re.compile(
    r"\n\n\[Attached image: (?P<path>.+) — use the Read tool to view it\]\Z"
)
UNCAPTIONED: Final = "echo: Please examine this image: "


def injected(phone: PhoneSimulator, session: str) -> list[str]:
    """The agent's echoes of injected images (captioned or not), in order."""
    found: list[str] = []
    for item in phone.messages("output"):
        message = item.message
        content = message.entry.content or ""
        if message.sessionId == session and (
            (content.startswith("echo: ") and ATTACHED.search(content))
            or content.startswith(UNCAPTIONED)
        ):
            found.append(content)
    return found


async def wait_injected(phone: PhoneSimulator, session: str, count: int) -> list[str]:
    """Wait until at least `count` images were injected; return every echo so far."""
    await phone.wait_until(
        lambda: len(injected(phone, session)) >= count or None,
        timeout=60,
        what=f"{count} injected image(s)",
    )
    return injected(phone, session)


def uploads_dir(workspace: Path) -> Path:
    """Where the bridge saves images (under the first workspace root)."""
    return workspace / ".codedeck" / "uploads"


def saved_files(workspace: Path) -> list[Path]:
    directory = uploads_dir(workspace)
    return sorted(directory.iterdir()) if directory.is_dir() else []


def check_saved(echo: str, caption: str, workspace: Path, data: bytes, name: str) -> Path:
    """The echo names a file under the uploads directory: safe name, 0600, these bytes."""
    assert echo.startswith(f"echo: {caption}\n\n[Attached image: "), echo
    match = ATTACHED.search(echo)
    assert match is not None, echo
    path = Path(match["path"])
    assert path.is_absolute()
    assert path.parent.resolve() == uploads_dir(workspace).resolve()
    assert re.fullmatch(name, path.name), path.name
    assert path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(uploads_dir(workspace).stat().st_mode) == 0o700
    return path


def chunks_of(data: bytes, count: int) -> list[str]:
    """One base64 encoding of `data` cut into `count` pieces."""
    text = base64.b64encode(data).decode()
    size = -(-len(text) // count)
    size += -size % 4  # every piece but the last a multiple of four
    return [text[i : i + size] for i in range(0, len(text), size)]


def chunk(
    session: str, upload: str, index: int, total: int, data: str, text: str = "look"
) -> UploadImageChunkedCommand:
    return UploadImageChunkedCommand(
        sessionId=session,
        uploadId=upload,
        filename="../../etc/my pic (1).PNG",
        mimeType="image/png",
        base64Data=data,
        text=text,
        chunkIndex=index,
        totalChunks=total,
    )


@dataclass(frozen=True, slots=True)
class Sealed:
    """An encrypted blob and what decrypts it (hex, as the command carries them)."""

    blob: bytes = field(repr=False)
    key: str = field(repr=False)
    iv: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.blob).hexdigest()


def seal(image: bytes) -> Sealed:
    """Encrypt as a phone does: AES-256-GCM, a 12-byte iv, the 16-byte tag at the end."""
    key, iv = os.urandom(32), os.urandom(12)
    return Sealed(AESGCM(key).encrypt(iv, image, None), key.hex(), iv.hex())


def blossom_upload(
    session: str,
    url: str,
    sealed: Sealed,
    *,
    text: str = "what is this?",
    sha256: str | None = None,
    key: str | None = None,
    size: int | None = None,
) -> UploadImageBlossomCommand:
    return UploadImageBlossomCommand(
        sessionId=session,
        hash=sha256 or sealed.sha256,
        url=url,
        key=key or sealed.key,
        iv=sealed.iv,
        filename="Screenshot 2025/01/31 at 12:00.png",
        mimeType="image/png",
        text=text,
        sizeBytes=len(sealed.blob) if size is None else size,
    )
