"""The engine's side of ``upload-image``: both shapes, up to the saved file.

Flow: a Blossom upload is checked (https, size, hex fields) and handed to the runtime to fetch,
verify and decrypt (``FetchBlossomImage`` → ``ImageReceived``); a chunked upload is assembled
here (:class:`~bridge.engine.sessions.uploads.UploadAssembler`). A complete image then passes the dedup
memory (the same session + image + caption within 10 minutes is injected once) and is saved by
the runtime (``SaveImage`` → ``ImageSaved``); the engine injects the saved path as the session's
next input. There is no wire reply for an image (REFERENCE-BEHAVIOUR §1.13): refusals are
logged through ``Dropped``.
"""

from __future__ import annotations

import hashlib

from bridge.engine.effects import Dropped, Effect, FetchBlossomImage, SaveImage
from bridge.engine.sessions.uploads import (
    ImageDedup,
    ImageReady,
    UploadAssembler,
    UploadFailed,
    check_blossom_command,
    safe_image_name,
)
from bridge.protocol import UploadImageBlossomCommand, UploadImageChunkedCommand

__all__ = ["Attachments"]


class Attachments:
    """Chunked uploads in flight and the dedup memory."""

    def __init__(self) -> None:
        self.uploads = UploadAssembler()
        self.dedup = ImageDedup()

    def next_deadline(self) -> float | None:
        deadlines = [self.uploads.next_deadline(), self.dedup.next_deadline()]
        return min((d for d in deadlines if d is not None), default=None)

    def tick(self, now: float) -> list[Effect]:
        self.dedup.sweep(now)
        return [
            Dropped(f"image upload {failed.upload_id[:8]} dropped: {failed.reason}")
            for failed in self.uploads.sweep(now)
        ]

    def blossom(self, command: UploadImageBlossomCommand, phone: str) -> list[Effect]:
        problem = check_blossom_command(command)
        if problem is not None:
            return [Dropped(f"image upload refused: {problem}")]
        return [
            FetchBlossomImage(
                phone=phone,
                session_id=command.sessionId,
                url=command.url,
                sha256=command.hash.lower(),
                key=command.key,
                iv=command.iv,
                size_bytes=command.sizeBytes,
                filename=command.filename,
                mime_type=command.mimeType,
                text=command.text,
            )
        ]

    def chunk(self, command: UploadImageChunkedCommand, phone: str, now: float) -> list[Effect]:
        outcome = self.uploads.add(phone, command, now)
        if isinstance(outcome, UploadFailed):
            return [Dropped(f"image upload {outcome.upload_id[:8]} dropped: {outcome.reason}")]
        if isinstance(outcome, ImageReady):
            return self.ready(
                outcome.session_id,
                outcome.filename,
                outcome.mime_type,
                outcome.text,
                outcome.data,
                now,
            )
        return []

    def ready(
        self, session_id: str, filename: str, mime_type: str, text: str, data: bytes, now: float
    ) -> list[Effect]:
        """A complete image: dedup, then save it."""
        digest = hashlib.sha256(data).hexdigest()
        if not self.dedup.admit(session_id, digest, text, now):
            return [Dropped("the same image and caption arrived again within 10 minutes; ignored")]
        name = safe_image_name(filename, mime_type, int(now * 1000), data)
        return [SaveImage(session_id, name, data, text)]

    def abort_session(self, session_id: str) -> None:
        """The session closed: its uploads in flight are dropped."""
        self.uploads.abort_session(session_id)

    def abort_phone(self, phone: str) -> None:
        """The phone was unpaired: its uploads in flight are dropped."""
        self.uploads.abort_phone(phone)
