"""Slow work the engine asks for and hears back about: probes, downloads, file writes, GSD.

Each errand runs as its own task, owned here and cancelled at shutdown, so a slow relay of a
Blossom server or a provider that never answers can never stall the engine loop. The answer
goes back to the engine as an input (``ProviderProbed``, ``ImageReceived``, …) through `feed`.
Failures become answers too (``valid=None``, ``ImageRefused``): nothing here raises into the
daemon.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from bridge.engine.effects import (
    FetchBlossomImage,
    ProbeAnthropicKey,
    ProbeProvider,
    ReadGsdState,
    SaveImage,
)
from bridge.engine.inputs import (
    CredentialsProbed,
    GsdStateRead,
    ImageReceived,
    ImageRefused,
    ImageSaved,
    Input,
    ProviderProbed,
)
from bridge.engine.providers import ProbeRequest
from bridge.protocol import UploadImageBlossomCommand
from bridge.runtime.blossom import BlossomError, Fetcher, fetch_blossom_image
from bridge.runtime.gsd import gsd_state
from bridge.runtime.images import ImageSaveError, save_image_async
from bridge.runtime.probes import probe_anthropic_key, probe_provider

__all__ = ["Errand", "Errands"]

logger = logging.getLogger(__name__)

Errand = ProbeProvider | ProbeAnthropicKey | ReadGsdState | FetchBlossomImage | SaveImage
DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"


class Errands:
    """Runs errands concurrently and feeds their answers back.

    Args:
        feed: puts an input on the engine's queue.
        roots: the workspace roots (images are saved under the first one).
        fetch: the Blossom HTTP fetcher (injectable for tests; https by default).
        anthropic_url: where the key probe goes (``$ANTHROPIC_BASE_URL`` or Anthropic's API).
    """

    def __init__(
        self,
        feed: Callable[[Input], None],
        roots: Sequence[Path],
        *,
        fetch: Fetcher | None = None,
        anthropic_url: str | None = None,
    ) -> None:
        self._feed = feed
        self._roots = list(roots)
        self._fetch = fetch
        self._anthropic_url = (
            anthropic_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_URL
        )
        self._tasks: set[asyncio.Task[None]] = set()

    def run(self, errand: Errand) -> None:
        match errand:
            case ProbeProvider():
                self._spawn(self._probe_provider(errand), "probe-provider")
            case ProbeAnthropicKey():
                self._spawn(self._probe_key(errand), "probe-key")
            case ReadGsdState():
                self._spawn(self._read_gsd(errand), "gsd")
            case FetchBlossomImage():
                self._spawn(self._fetch_image(errand), "blossom")
            case SaveImage():
                self._spawn(self._save_image(errand), "save-image")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("! errand %s crashed", task.get_name(), exc_info=task.exception())

    async def _probe_provider(self, errand: ProbeProvider) -> None:
        request = ProbeRequest(base_url=errand.base_url, token=errand.token, model=errand.model)
        valid = await probe_provider(request)
        self._feed(ProviderProbed(errand.phone, errand.profile_id, valid))

    async def _probe_key(self, errand: ProbeAnthropicKey) -> None:
        valid = await probe_anthropic_key(errand.key, base_url=self._anthropic_url)
        self._feed(CredentialsProbed(errand.phone, valid))

    async def _read_gsd(self, errand: ReadGsdState) -> None:
        state = await asyncio.to_thread(gsd_state, Path(errand.cwd))
        self._feed(GsdStateRead(errand.session_id, state))

    async def _fetch_image(self, errand: FetchBlossomImage) -> None:
        command = UploadImageBlossomCommand(
            sessionId=errand.session_id,
            hash=errand.sha256,
            url=errand.url,
            key=errand.key,
            iv=errand.iv,
            filename=errand.filename,
            mimeType=errand.mime_type,
            text=errand.text,
            sizeBytes=errand.size_bytes,
        )
        try:
            data = await fetch_blossom_image(command, fetch=self._fetch)
        except BlossomError as exc:
            self._feed(ImageRefused(errand.session_id, str(exc)))
            return
        self._feed(
            ImageReceived(
                errand.phone,
                errand.session_id,
                errand.filename,
                errand.mime_type,
                errand.text,
                data,
            )
        )

    async def _save_image(self, errand: SaveImage) -> None:
        if not self._roots:
            self._feed(ImageRefused(errand.session_id, "no workspace root to save images under"))
            return
        try:
            path = await save_image_async(self._roots[0], errand.name, errand.data)
        except ImageSaveError as exc:
            self._feed(ImageRefused(errand.session_id, str(exc)))
            return
        self._feed(ImageSaved(errand.session_id, str(path), errand.text))
