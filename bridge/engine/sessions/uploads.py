"""Image uploads (``upload-image``): chunk assembly, duplicate suppression, names and the input.

The phone sends an image in one of two shapes (PROTOCOL-v10-wire.md §5 rows 15a/15b; limits in
REFERENCE-BEHAVIOUR §1.13):

- **Blossom**: an AES-256-GCM blob on an https server; the runtime downloads and decrypts it
  (:mod:`bridge.runtime.errands.blossom`) after :func:`check_blossom_command` accepted the command.
- **Chunked**: base64 pieces inline, assembled here per ``(phone, sessionId, uploadId)``. Rules:
  the first chunk fixes ``totalChunks`` / ``filename`` / ``mimeType`` / ``text``; an out-of-range
  ``chunkIndex`` or a ``totalChunks`` that disagrees is ignored, a duplicate index is ignored
  (the first copy wins); the upload completes when every index has arrived; it is dropped after
  :data:`UPLOAD_IDLE_TIMEOUT` seconds without a new chunk (the timer resets on each chunk), or
  as soon as it exceeds :data:`MAX_IMAGE_BYTES` or holds invalid base64.

Base64 is decoded strictly (alphabet and padding checked). A phone may encode each chunk on its
own (padding inside the joined text) or cut one encoding into pieces (chunks of any length): when
every chunk but the last has a length divisible by four each chunk is decoded on its own,
otherwise the joined text is decoded; both readings agree whenever both are possible.

Either way the result is an :class:`ImageReady`. Before saving it the engine asks
:class:`ImageDedup`: the same session + image (sha256) + caption within
:data:`DEDUP_WINDOW` seconds is not injected twice (at most :data:`DEDUP_MAX_KEYS` keys). The
file is saved as :func:`safe_image_name` under ``<root>/.codedeck/uploads/`` and the session gets
:func:`injected_text` as its next input.

Memory is bounded: at most :data:`MAX_OPEN_UPLOADS` uploads in progress, each at most
:data:`MAX_IMAGE_BYTES` (decoded). Pure: time is passed in; the runtime sleeps until
``next_deadline()`` and calls ``sweep(now)``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from bridge.protocol import UploadImageBlossomCommand, UploadImageChunkedCommand
from bridge.records import record

__all__ = [
    "DEDUP_MAX_KEYS",
    "DEDUP_WINDOW",
    "MAX_IMAGE_BYTES",
    "MAX_NAME_STEM",
    "MAX_OPEN_UPLOADS",
    "MAX_TOTAL_CHUNKS",
    "UPLOAD_IDLE_TIMEOUT",
    "ChunkAccepted",
    "ChunkIgnored",
    "ChunkOutcome",
    "ImageDedup",
    "ImageReady",
    "UploadAssembler",
    "UploadFailed",
    "check_blossom_command",
    "image_extension",
    "injected_text",
    "safe_image_name",
]

MAX_IMAGE_BYTES: Final = 25 * 1024 * 1024
UPLOAD_IDLE_TIMEOUT: Final = 60.0
DEDUP_WINDOW: Final = 600.0
DEDUP_MAX_KEYS: Final = 200
MAX_OPEN_UPLOADS: Final = 8
MAX_TOTAL_CHUNKS: Final = 100_000
MAX_NAME_STEM: Final = 100

_MAX_ENCODED: Final = (MAX_IMAGE_BYTES + 2) // 3 * 4
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_HEX: Final = re.compile(r"[0-9a-fA-F]*")
_UNSAFE_NAME_CHARS: Final = re.compile(r"[^a-zA-Z0-9._-]")
_IMAGE_SUFFIX: Final = re.compile(r"\.(png|jpe?g|gif|webp|heic|heif)$", re.IGNORECASE)
_FINISHED_MEMORY: Final = 200

UploadKey = tuple[str, str, str]  # (phone, session id, upload id)


# --- outcomes --------------------------------------------------------------------------------


@record
class ImageReady:
    """A complete image, ready for the dedup check and saving. `data` stays out of ``repr``."""

    session_id: str
    phone: str
    filename: str
    mime_type: str
    text: str
    data: bytes = field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@record
class ChunkAccepted:
    """The chunk was stored; the upload waits for more."""

    upload_id: str
    received: int
    total: int


@record
class ChunkIgnored:
    """The chunk changed nothing (duplicate, out of range, ...); the upload goes on."""

    upload_id: str
    reason: str


@record
class UploadFailed:
    """The upload was dropped (too large, bad base64, timed out, too many at once)."""

    session_id: str
    phone: str
    upload_id: str
    reason: str


ChunkOutcome = ChunkAccepted | ChunkIgnored | UploadFailed | ImageReady


# --- the chunked-upload assembler ------------------------------------------------------------


@dataclass(slots=True)
class _Upload:
    total: int
    filename: str
    mime_type: str
    text: str
    deadline: float
    chunks: dict[int, str] = field(default_factory=dict)
    encoded: int = 0


def _decode(chunks: list[str]) -> bytes:
    """Strict base64 of the assembled chunks (see the module docstring). Raises ValueError."""
    if all(len(c) % 4 == 0 for c in chunks[:-1]):
        return b"".join(base64.b64decode(c, validate=True) for c in chunks)
    return base64.b64decode("".join(chunks), validate=True)


class UploadAssembler:
    """Chunked uploads in progress."""

    def __init__(self) -> None:
        self._uploads: dict[UploadKey, _Upload] = {}
        self._finished: OrderedDict[UploadKey, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._uploads)

    def add(self, phone: str, command: UploadImageChunkedCommand, now: float) -> ChunkOutcome:
        """Take one chunk from `phone` (the event author).

        Returns:
            What happened: accepted, ignored, the upload failed, or the image is complete.
        """
        key = (phone, command.sessionId, command.uploadId)
        upload_id = command.uploadId
        finished_at = self._finished.get(key)
        if finished_at is not None and now - finished_at < DEDUP_WINDOW:
            return ChunkIgnored(upload_id, "chunk of an upload that already completed")
        upload = self._uploads.get(key)
        if upload is None:
            if command.totalChunks > MAX_TOTAL_CHUNKS:
                return self._fail(key, f"too many chunks ({command.totalChunks})")
            if len(self._uploads) >= MAX_OPEN_UPLOADS:
                return self._fail(key, f"too many uploads in progress (at most {MAX_OPEN_UPLOADS})")
            upload = _Upload(
                total=command.totalChunks,
                filename=command.filename,
                mime_type=command.mimeType,
                text=command.text,
                deadline=now + UPLOAD_IDLE_TIMEOUT,
            )
            self._uploads[key] = upload
        if command.totalChunks != upload.total:
            return ChunkIgnored(
                upload_id, f"totalChunks {command.totalChunks} differs from {upload.total}"
            )
        index = command.chunkIndex
        if index >= upload.total:
            return ChunkIgnored(upload_id, f"chunkIndex {index} is out of range")
        if index in upload.chunks:
            return ChunkIgnored(upload_id, f"chunk {index} arrived twice")
        data = command.base64Data
        if _BASE64.fullmatch(data) is None:
            return self._fail(key, f"chunk {index} is not valid base64")
        upload.encoded += len(data)
        if upload.encoded > _MAX_ENCODED + 4 * len(upload.chunks) + 4:
            return self._fail(key, "the image exceeds 25 MiB")
        upload.chunks[index] = data
        upload.deadline = now + UPLOAD_IDLE_TIMEOUT
        if len(upload.chunks) < upload.total:
            return ChunkAccepted(upload_id, len(upload.chunks), upload.total)
        del self._uploads[key]
        self._remember_finished(key, now)
        try:
            image = _decode([upload.chunks[i] for i in range(upload.total)])
        except (ValueError, binascii.Error):
            return UploadFailed(key[1], phone, upload_id, "the assembled image is not valid base64")
        if len(image) > MAX_IMAGE_BYTES:
            return UploadFailed(key[1], phone, upload_id, "the image exceeds 25 MiB")
        return ImageReady(
            session_id=command.sessionId,
            phone=phone,
            filename=upload.filename,
            mime_type=upload.mime_type,
            text=upload.text,
            data=image,
        )

    def _fail(self, key: UploadKey, reason: str) -> UploadFailed:
        self._uploads.pop(key, None)
        return UploadFailed(key[1], key[0], key[2], reason)

    def _remember_finished(self, key: UploadKey, now: float) -> None:
        self._finished[key] = now
        self._finished.move_to_end(key)
        while len(self._finished) > _FINISHED_MEMORY:
            self._finished.popitem(last=False)

    def next_deadline(self) -> float | None:
        """When the oldest idle upload times out (None when nothing is in progress)."""
        return min((u.deadline for u in self._uploads.values()), default=None)

    def sweep(self, now: float) -> list[UploadFailed]:
        """Drop uploads idle for :data:`UPLOAD_IDLE_TIMEOUT` seconds (missing chunks)."""
        expired = [key for key, u in self._uploads.items() if now >= u.deadline]
        failed: list[UploadFailed] = []
        for key in expired:
            upload = self._uploads.pop(key)
            reason = (
                f"timed out after {UPLOAD_IDLE_TIMEOUT:g} s without a chunk "
                f"({len(upload.chunks)} of {upload.total} chunks arrived)"
            )
            failed.append(UploadFailed(key[1], key[0], key[2], reason))
        while self._finished and now - next(iter(self._finished.values())) >= DEDUP_WINDOW:
            self._finished.popitem(last=False)
        return failed

    def abort_session(self, session_id: str) -> int:
        """Forget the uploads of a closed session; returns how many were dropped."""
        keys = [key for key in self._uploads if key[1] == session_id]
        for key in keys:
            del self._uploads[key]
        return len(keys)

    def abort_phone(self, phone: str) -> int:
        """Forget the uploads of an unpaired phone; returns how many were dropped."""
        keys = [key for key in self._uploads if key[0] == phone]
        for key in keys:
            del self._uploads[key]
        return len(keys)


# --- duplicate suppression -------------------------------------------------------------------


class ImageDedup:
    """Which (session, image, caption) triples were injected in the last ten minutes."""

    def __init__(self, window: float = DEDUP_WINDOW, max_keys: int = DEDUP_MAX_KEYS) -> None:
        self._window = window
        self._max_keys = max_keys
        self._seen: OrderedDict[tuple[str, str, str], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    @staticmethod
    def _key(session_id: str, image_sha256: str, caption: str) -> tuple[str, str, str]:
        # The caption is hashed so that a key stays small whatever the phone sent.
        return (
            session_id,
            image_sha256,
            hashlib.sha256(caption.encode("utf-8", "replace")).hexdigest(),
        )

    def is_duplicate(self, session_id: str, image_sha256: str, caption: str, now: float) -> bool:
        """True when the same triple was remembered less than the window ago."""
        seen = self._seen.get(self._key(session_id, image_sha256, caption))
        return seen is not None and now - seen < self._window

    def remember(self, session_id: str, image_sha256: str, caption: str, now: float) -> None:
        """Record an injection; the oldest key goes when there are more than the maximum."""
        key = self._key(session_id, image_sha256, caption)
        self._seen[key] = now
        self._seen.move_to_end(key)
        while len(self._seen) > self._max_keys:
            self._seen.popitem(last=False)

    def admit(self, session_id: str, image_sha256: str, caption: str, now: float) -> bool:
        """Remember the triple and return True, unless it is a duplicate (then False)."""
        if self.is_duplicate(session_id, image_sha256, caption, now):
            return False
        self.remember(session_id, image_sha256, caption, now)
        return True

    def next_deadline(self) -> float | None:
        """When the oldest key expires (memory only: correctness never waits for it)."""
        if not self._seen:
            return None
        return next(iter(self._seen.values())) + self._window

    def sweep(self, now: float) -> None:
        """Forget keys older than the window."""
        while self._seen and now - next(iter(self._seen.values())) >= self._window:
            self._seen.popitem(last=False)


# --- Blossom ---------------------------------------------------------------------------------


def check_blossom_command(command: UploadImageBlossomCommand) -> str | None:
    """Why a Blossom upload is refused before any download, or None. Never quotes the key."""
    parts = urlsplit(command.url)
    if parts.scheme.lower() != "https" or not parts.hostname:
        return "the Blossom URL must be https"
    if command.sizeBytes > MAX_IMAGE_BYTES:
        return f"the image is too large ({command.sizeBytes} bytes; the limit is 25 MiB)"
    if len(command.hash) != 64 or _HEX.fullmatch(command.hash) is None:
        return "hash must be the 64-hex-digit sha256 of the encrypted blob"
    if len(command.key) != 64 or _HEX.fullmatch(command.key) is None:
        return "key must be 64 hex digits (an AES-256 key)"
    if (
        len(command.iv) % 2
        or not 16 <= len(command.iv) <= 256
        or _HEX.fullmatch(command.iv) is None
    ):
        return "iv must be 8 to 128 bytes in hex"
    return None


# --- saved file name and injected input ------------------------------------------------------


def image_extension(mime_type: str, data: bytes = b"") -> str:
    """The file extension: from the bytes when they are a known image, else from the MIME type.

    The reference writes ``.png`` for ``image/png`` and ``.jpg`` otherwise. The Read tool picks
    the media type from the extension, so a GIF or WebP saved as ``.jpg`` would be misread:
    those are recognised too (by content first, as a phone's MIME type can be wrong).
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return ".png"
    if data.startswith(b"\xff\xd8\xff"):
        return ".jpg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return ".gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    mime = mime_type.strip().lower()
    return {"image/png": ".png", "image/gif": ".gif", "image/webp": ".webp"}.get(mime, ".jpg")


def safe_image_name(filename: str, mime_type: str, epoch_ms: int, data: bytes = b"") -> str:
    """``<epochMs>-<name>`` + the extension, safe as one path component.

    The phone's name is reduced to its last path component, every character outside
    ``[a-zA-Z0-9._-]`` becomes ``_``, leading and trailing dots go, an image extension is dropped
    (the real one is appended), and the stem is cut to :data:`MAX_NAME_STEM` characters.
    ``image`` stands in for a name that is left empty.
    """
    base = re.split(r"[/\\]", filename)[-1]
    stem = _UNSAFE_NAME_CHARS.sub("_", base)
    stem = _IMAGE_SUFFIX.sub("", stem).strip(".")[:MAX_NAME_STEM].rstrip(".")
    return f"{max(0, int(epoch_ms))}-{stem or 'image'}{image_extension(mime_type, data)}"


def injected_text(text: str, path: str) -> str:
    """The input the session receives for a saved image (with or without the phone's caption)."""
    if text.strip():
        return f"{text}\n\n[Attached image: {path} — use the Read tool to view it]"
    return f"Please examine this image: {path}"
