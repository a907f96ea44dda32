"""Errands: each kind feeds its answer back; failures are answers too; close cancels the rest.

The probes go to a local aiohttp server on 127.0.0.1 (plain http to loopback is allowed); the
Blossom download is injected (its transport has tests of its own in test_blossom.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

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
from bridge.protocol import ModelEntry
from bridge.runtime.errands.blossom import BlossomError, Fetcher
from bridge.runtime.errands.dispatch import Errands, ModelLister
from bridge.runtime.errands.gsd import gsd_state
from tests.runtime.support import PHONE, finished
from tests.support.http_servers import LocalHttpServer, RecordedRequest, Reply

TOKEN = "provider-token-3c9e1d"
KEY = "anthropic-key-8b2f07"
IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


@dataclass
class Rig:
    fed: list[Input]
    errands: Errands

    async def run(self, *errands: object) -> list[Input]:
        for errand in errands:
            self.errands.run(errand)  # type: ignore[arg-type]
        await finished(self.errands)
        return self.fed


def make_rig(
    roots: Sequence[Path] = (),
    *,
    list_models: ModelLister | None = None,
    fetch: Fetcher | None = None,
    anthropic_url: str | None = None,
) -> Rig:
    fed: list[Input] = []
    errands = Errands(
        fed.append, list(roots), list_models=list_models, fetch=fetch, anthropic_url=anthropic_url
    )
    return Rig(fed, errands)


# --- probes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "valid"), [(200, True), (400, True), (401, False), (403, False)]
)
async def test_a_provider_probe_answers_provider_probed(status: int, valid: bool) -> None:
    async with LocalHttpServer(lambda request: Reply(status)) as server:
        fed = await make_rig().run(
            ProbeProvider(PHONE.public_hex, "kimi", server.origin + "/anthropic", TOKEN, "k2")
        )
    assert fed == [ProviderProbed(PHONE.public_hex, "kimi", valid)]
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/anthropic/v1/messages")
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.json()["model"] == "k2"


async def test_a_provider_probe_that_cannot_run_answers_unknown() -> None:
    fed = await make_rig().run(ProbeProvider(PHONE.public_hex, "kimi", "http://example.com", TOKEN))
    assert fed == [ProviderProbed(PHONE.public_hex, "kimi", None)]  # insecure: never sent


@pytest.mark.parametrize(("status", "valid"), [(200, True), (401, False)])
async def test_a_key_probe_answers_credentials_probed(status: int, valid: bool) -> None:
    def reply(request: RecordedRequest) -> Reply:
        return Reply(status)

    async with LocalHttpServer(reply) as server:
        fed = await make_rig(anthropic_url=server.origin).run(
            ProbeAnthropicKey(PHONE.public_hex, KEY)
        )
    assert fed == [CredentialsProbed(PHONE.public_hex, valid)]
    [request] = server.requests
    assert (request.path, request.headers["x-api-key"]) == ("/v1/messages", KEY)


# --- GSD -----------------------------------------------------------------------------------


async def test_gsd_state_is_read_for_the_session(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "STATE.md").write_text("# State\n\nStatus: planning\n")
    fed = await make_rig().run(ReadGsdState("s-1", str(project)))
    assert fed == [GsdStateRead("s-1", gsd_state(project))]


# --- images --------------------------------------------------------------------------------


def sealed_image() -> tuple[bytes, str, str]:
    key, iv = os.urandom(32), os.urandom(12)
    return AESGCM(key).encrypt(iv, IMAGE, None), key.hex(), iv.hex()


def blossom(blob: bytes, key: str, iv: str, *, sha256: str | None = None) -> FetchBlossomImage:
    return FetchBlossomImage(
        phone=PHONE.public_hex,
        session_id="s-1",
        url="https://blossom.test/abc",
        sha256=sha256 or hashlib.sha256(blob).hexdigest(),
        key=key,
        iv=iv,
        size_bytes=len(blob),
        filename="shot.png",
        mime_type="image/png",
        text="what is this?",
    )


async def test_a_blossom_image_is_fetched_checked_and_decrypted() -> None:
    blob, key, iv = sealed_image()
    asked: list[tuple[str, int]] = []

    async def fetch(url: str, max_bytes: int) -> bytes:
        asked.append((url, max_bytes))
        return blob

    fed = await make_rig(fetch=fetch).run(blossom(blob, key, iv))
    assert fed == [
        ImageReceived(PHONE.public_hex, "s-1", "shot.png", "image/png", "what is this?", IMAGE)
    ]
    assert asked == [("https://blossom.test/abc", 25 * 1024 * 1024)]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("hash", "the blob's sha256 does not match the hash the phone sent"),
        ("http", "the Blossom server answered HTTP 404"),
    ],
)
async def test_a_refused_blossom_image_answers_image_refused(fault: str, reason: str) -> None:
    blob, key, iv = sealed_image()

    async def fetch(url: str, max_bytes: int) -> bytes:
        if fault == "http":
            raise BlossomError("the Blossom server answered HTTP 404")
        return blob

    errand = blossom(blob, key, iv, sha256="0" * 64 if fault == "hash" else None)
    assert await make_rig(fetch=fetch).run(errand) == [ImageRefused("s-1", reason)]


async def test_an_image_is_saved_under_the_first_root(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    fed = await make_rig([first, second]).run(SaveImage("s-1", "shot.png", IMAGE, "look"))
    path = first / ".codedeck" / "uploads" / "shot.png"
    assert fed == [ImageSaved("s-1", str(path), "look")]
    assert path.read_bytes() == IMAGE


@pytest.mark.parametrize(
    ("roots", "name", "reason"),
    [
        (False, "shot.png", "no workspace root to save images under"),
        (True, "../shot.png", "refusing an unsafe image file name"),
    ],
    ids=["no-root", "unsafe-name"],
)
async def test_an_image_that_cannot_be_saved_answers_image_refused(
    tmp_path: Path, roots: bool, name: str, reason: str
) -> None:
    fed = await make_rig([tmp_path] if roots else []).run(SaveImage("s-1", name, IMAGE))
    assert fed == [ImageRefused("s-1", reason)]


# --- folders -------------------------------------------------------------------------------


async def test_create_folder_over_a_file_answers_its_error(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    fed = await make_rig([tmp_path]).run(CreateFolder("req-1", str(tmp_path), "taken"))
    assert fed == [FolderCreated("req-1", "taken", "a file with that name already exists")]


async def test_scan_folders_reports_the_project_folders_of_every_root(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for path in ("app", "group/svc/.git", "group/notes", ".hidden", "node_modules/x"):
        (one / path).mkdir(parents=True)
    (one / "app" / "package.json").write_text("{}")
    (two / "Zeta").mkdir(parents=True)
    (two / "app").mkdir()
    rig = make_rig([one, two])
    await rig.errands.scan_folders()
    assert rig.fed == [FoldersScanned(("app", "group", "group/svc", "Zeta"))]


# --- models --------------------------------------------------------------------------------

MODELS = [ModelEntry(id="opus", label="Opus"), ModelEntry(id="haiku")]


async def test_list_models_answers_what_the_lister_says() -> None:
    asked: list[str | None] = []

    async def lister(agent: str | None) -> list[ModelEntry]:
        asked.append(agent)
        return MODELS

    assert await make_rig(list_models=lister).run(ListModels()) == [ModelsListed(tuple(MODELS))]
    assert await make_rig(list_models=lister).run(ListModels("opencode")) == [
        ModelsListed(tuple(MODELS), agent="opencode")
    ]
    assert asked == [None, "opencode"]


async def test_a_lister_that_raises_still_answers(caplog: pytest.LogCaptureFixture) -> None:
    async def lister(agent: str | None) -> list[ModelEntry]:
        raise RuntimeError("the CLI crashed")

    assert await make_rig(list_models=lister).run(ListModels()) == [ModelsListed(())]
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == "! listing the models failed" and record.exc_info is not None


async def test_no_lister_answers_no_models() -> None:
    assert await make_rig().run(ListModels()) == [ModelsListed(())]


# --- close ---------------------------------------------------------------------------------


async def test_close_cancels_running_errands() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def lister(agent: str | None) -> list[ModelEntry]:
        started.set()
        try:
            await asyncio.Event().wait()  # a lister that never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return []

    rig = make_rig(list_models=lister)
    rig.errands.run(ListModels())
    await started.wait()
    await rig.errands.close()
    assert cancelled.is_set()
    assert rig.fed == []
    rig.errands.run(ListModels())  # refused once closed: nothing starts
    assert len(rig.errands._tasks) == 0
