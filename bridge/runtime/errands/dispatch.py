"""Slow work the engine asks for and hears back about: probes, downloads, file writes, GSD,
project folders, the model list.

Each errand runs as its own task in a :class:`~bridge.tasks.TaskSet` owned here and cancelled at
shutdown, so a Blossom server or a provider that never answers can never stall the engine loop.
The answer goes back to the engine as an input (``ProviderProbed``, ``ImageReceived``,
``FolderCreated``, …) through `feed`. Expected failures become answers too (``valid=None``,
``ImageRefused``, a ``FolderCreated`` with its error); a bug in an errand is logged with its
traceback by the task set and costs only that errand's answer.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import assert_never

from bridge.engine.effects import (
    CreateFolder,
    FetchBlossomImage,
    ListModels,
    ProbeAnthropicKey,
    ProbeProvider,
    ReadGsdState,
    SaveImage,
)
from bridge.engine.inputs import (
    CredentialsProbed,
    FolderCreated,
    FoldersScanned,
    GsdStateRead,
    ImageReceived,
    ImageRefused,
    ImageSaved,
    Input,
    ModelsListed,
    ProviderProbed,
)
from bridge.engine.phones.providers import ProbeRequest
from bridge.protocol import ModelEntry, UploadImageBlossomCommand
from bridge.runtime.errands.blossom import BlossomError, Fetcher, fetch_blossom_image
from bridge.runtime.errands.gsd import gsd_state
from bridge.runtime.errands.images import ImageSaveError, save_image_async
from bridge.runtime.errands.probes import probe_anthropic_key, probe_provider
from bridge.runtime.errands.workspace import WorkspaceError, create_folder, scan_folders
from bridge.tasks import TaskSet

__all__ = ["Errand", "Errands"]

logger = logging.getLogger(__name__)

Errand = (
    ProbeProvider
    | ProbeAnthropicKey
    | ReadGsdState
    | FetchBlossomImage
    | SaveImage
    | CreateFolder
    | ListModels
)
ModelLister = Callable[[str | None], Awaitable[list[ModelEntry]]]
"""Asks an agent (None: Claude Code, for a v10 request) which models it offers (see
``bridge.runtime.hosts.agent_env``)."""
DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"


class Errands:
    """Runs errands concurrently and feeds their answers back.

    Args:
        feed: puts an input on the engine's queue.
        roots: the workspace roots (images are saved under the first one).
        list_models: answers ``models-request``.
        fetch: the Blossom HTTP fetcher (injectable for tests; https by default).
        anthropic_url: where the key probe goes (``$ANTHROPIC_BASE_URL`` or Anthropic's API).
    """

    def __init__(
        self,
        feed: Callable[[Input], None],
        roots: Sequence[Path],
        *,
        list_models: ModelLister | None = None,
        fetch: Fetcher | None = None,
        anthropic_url: str | None = None,
    ) -> None:
        self._feed = feed
        self._roots = list(roots)
        self._fetch = fetch
        self._list_models = list_models
        self._anthropic_url = (
            anthropic_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_URL
        )
        self._tasks = TaskSet("errands", logger=logger)

    def run(self, errand: Errand) -> None:
        """Start `errand`; its answer reaches the engine as an input."""
        match errand:
            case ProbeProvider():
                self._tasks.spawn(self._probe_provider(errand), "probe-provider")
            case ProbeAnthropicKey():
                self._tasks.spawn(self._probe_key(errand), "probe-key")
            case ReadGsdState():
                self._tasks.spawn(self._read_gsd(errand), "gsd")
            case FetchBlossomImage():
                self._tasks.spawn(self._fetch_image(errand), "blossom")
            case SaveImage():
                self._tasks.spawn(self._save_image(errand), "save-image")
            case CreateFolder():
                self._tasks.spawn(self._create_folder(errand), "create-folder")
            case ListModels():
                self._tasks.spawn(self._models(errand.agent), "list-models")
            case _:
                assert_never(errand)

    async def close(self) -> None:
        await self._tasks.close()

    async def scan_folders(self) -> None:
        """Report the project folders of the workspace roots (``FoldersScanned``)."""
        folders = await asyncio.to_thread(scan_folders, self._roots)
        self._feed(FoldersScanned(folders))

    async def _create_folder(self, errand: CreateFolder) -> None:
        try:
            path = await asyncio.to_thread(create_folder, Path(errand.root), errand.path)
        except WorkspaceError as exc:
            self._feed(FolderCreated(errand.request_id, errand.path, str(exc)))
            return
        self._feed(FolderCreated(errand.request_id, path))
        await self.scan_folders()

    async def _models(self, agent: str | None) -> None:
        models: list[ModelEntry] = []
        if self._list_models is not None:
            try:
                models = await self._list_models(agent)
            except Exception:  # the phone still gets an answer: "no live session answered"
                logger.exception("! listing the models failed")
        self._feed(ModelsListed(tuple(models), agent=agent))

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
