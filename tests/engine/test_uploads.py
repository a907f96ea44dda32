"""Image uploads: chunk assembly, idle timeout, caps, dedup window, safe names, injected text."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from bridge.engine.sessions.uploads import (
    DEDUP_MAX_KEYS,
    DEDUP_WINDOW,
    MAX_IMAGE_BYTES,
    MAX_NAME_STEM,
    MAX_OPEN_UPLOADS,
    UPLOAD_IDLE_TIMEOUT,
    ChunkAccepted,
    ChunkIgnored,
    ImageDedup,
    ImageReady,
    UploadAssembler,
    UploadFailed,
    check_blossom_command,
    image_extension,
    injected_text,
    safe_image_name,
)
from bridge.protocol import (
    UploadImageBlossomCommand,
    UploadImageChunkedCommand,
    decode_phone_to_bridge,
)

PHONE = "a" * 64
OTHER_PHONE = "b" * 64
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
T0 = 1_000.0


def chunk(
    index: int,
    total: int,
    data: str,
    *,
    upload_id: str = "u1",
    session_id: str = "s1",
    text: str = "look",
    filename: str = "shot.png",
) -> UploadImageChunkedCommand:
    # Built through the model (validated), not the wire decoder: the 25 MiB cases exceed the
    # decoder's 16 MiB message limit on purpose.
    return UploadImageChunkedCommand(
        sessionId=session_id,
        uploadId=upload_id,
        filename=filename,
        mimeType="image/png",
        base64Data=data,
        text=text,
        chunkIndex=index,
        totalChunks=total,
    )


def split_encoded(data: bytes, pieces: int) -> list[str]:
    """One base64 text cut into `pieces` parts at arbitrary offsets."""
    text = base64.b64encode(data).decode()
    size = -(-len(text) // pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


def encode_each(data: bytes, pieces: int) -> list[str]:
    """The bytes cut into parts, each part encoded on its own (padding inside the join)."""
    size = -(-len(data) // pieces)
    return [base64.b64encode(data[i : i + size]).decode() for i in range(0, len(data), size)]


# --- assembly --------------------------------------------------------------------------------


@pytest.mark.parametrize("splitter", [split_encoded, encode_each], ids=["cut-text", "per-chunk"])
def test_in_order_upload_completes(splitter: Any) -> None:
    data = PNG[:1001]  # not a multiple of 3: padding matters
    parts = splitter(data, 4)
    assert len(parts) == 4
    assembler = UploadAssembler()
    outcomes = [assembler.add(PHONE, chunk(i, 4, p), T0 + i) for i, p in enumerate(parts)]
    assert outcomes[:3] == [ChunkAccepted("u1", n, 4) for n in (1, 2, 3)]
    ready = outcomes[3]
    assert isinstance(ready, ImageReady)
    assert ready.data == data and ready.sha256 == hashlib.sha256(data).hexdigest()
    assert (ready.session_id, ready.phone, ready.filename, ready.text) == (
        "s1",
        PHONE,
        "shot.png",
        "look",
    )
    assert len(assembler) == 0 and assembler.next_deadline() is None


def test_out_of_order_duplicated_and_out_of_range_chunks() -> None:
    parts = split_encoded(PNG, 5)
    assembler = UploadAssembler()
    assert assembler.add(PHONE, chunk(3, 5, parts[3]), T0) == ChunkAccepted("u1", 1, 5)
    assert assembler.add(PHONE, chunk(0, 5, parts[0]), T0) == ChunkAccepted("u1", 2, 5)
    # a duplicate with other content: the first copy wins
    dup = assembler.add(PHONE, chunk(3, 5, "AAAA"), T0)
    assert dup == ChunkIgnored("u1", "chunk 3 arrived twice")
    out = assembler.add(PHONE, chunk(7, 5, parts[1]), T0)
    assert out == ChunkIgnored("u1", "chunkIndex 7 is out of range")
    other_total = assembler.add(PHONE, chunk(1, 6, parts[1]), T0)
    assert isinstance(other_total, ChunkIgnored) and "totalChunks 6" in other_total.reason
    assert assembler.add(PHONE, chunk(4, 5, parts[4]), T0) == ChunkAccepted("u1", 3, 5)
    assert assembler.add(PHONE, chunk(2, 5, parts[2]), T0) == ChunkAccepted("u1", 4, 5)
    ready = assembler.add(PHONE, chunk(1, 5, parts[1]), T0)
    assert isinstance(ready, ImageReady) and ready.data == PNG
    # a late duplicate of a finished upload does not start a new one
    late = assembler.add(PHONE, chunk(1, 5, parts[1]), T0 + 1)
    assert isinstance(late, ChunkIgnored) and "already completed" in late.reason
    assert len(assembler) == 0


def test_missing_chunk_times_out_and_each_chunk_resets_the_timer() -> None:
    parts = split_encoded(PNG, 3)
    assembler = UploadAssembler()
    assembler.add(PHONE, chunk(0, 3, parts[0]), T0)
    assert assembler.next_deadline() == T0 + UPLOAD_IDLE_TIMEOUT
    assembler.add(PHONE, chunk(2, 3, parts[2]), T0 + 50)
    assert assembler.next_deadline() == T0 + 50 + UPLOAD_IDLE_TIMEOUT
    assert assembler.sweep(T0 + 50 + UPLOAD_IDLE_TIMEOUT - 0.001) == []
    failed = assembler.sweep(T0 + 50 + UPLOAD_IDLE_TIMEOUT)
    assert failed == [
        UploadFailed(
            "s1", PHONE, "u1", "timed out after 60 s without a chunk (2 of 3 chunks arrived)"
        )
    ]
    assert len(assembler) == 0 and assembler.next_deadline() is None
    # the missing chunk arriving later starts a fresh (incomplete) upload, never a broken image
    assert assembler.add(PHONE, chunk(1, 3, parts[1]), T0 + 200) == ChunkAccepted("u1", 1, 3)


def test_uploads_are_keyed_by_phone_session_and_upload_id() -> None:
    parts = split_encoded(PNG, 2)
    assembler = UploadAssembler()
    assembler.add(PHONE, chunk(0, 2, parts[0]), T0)
    assert assembler.add(OTHER_PHONE, chunk(1, 2, parts[1]), T0) == ChunkAccepted("u1", 1, 2)
    assert assembler.add(PHONE, chunk(1, 2, parts[1], session_id="s2"), T0) == ChunkAccepted(
        "u1", 1, 2
    )
    assert len(assembler) == 3
    assert assembler.abort_session("s2") == 1
    assert assembler.abort_phone(OTHER_PHONE) == 1
    assert isinstance(assembler.add(PHONE, chunk(1, 2, parts[1]), T0), ImageReady)


@pytest.mark.parametrize(
    "bad", ["!!!!", "AB=C", "QUJD\n", "QQ==QQ=="], ids=["chars", "mid-pad", "newline", "double-pad"]
)
def test_invalid_base64_fails_the_upload(bad: str) -> None:
    assembler = UploadAssembler()
    assembler.add(PHONE, chunk(0, 2, "QUJD"), T0)
    outcome = assembler.add(PHONE, chunk(1, 2, bad), T0)
    assert isinstance(outcome, UploadFailed) and "base64" in outcome.reason
    assert len(assembler) == 0


def test_misaligned_padding_fails_at_assembly() -> None:
    assembler = UploadAssembler()
    assembler.add(PHONE, chunk(0, 2, "QQ=="), T0)  # 4 chars, padded ...
    outcome = assembler.add(PHONE, chunk(1, 2, "Q"), T0)  # ... then a stray char
    assert outcome == UploadFailed("s1", PHONE, "u1", "the assembled image is not valid base64")


def test_size_cap_on_the_assembled_bytes() -> None:
    piece = MAX_IMAGE_BYTES // 4 // 3 * 3  # a multiple of 3: no padding inside
    exact = b"\xff\xd8\xff" + bytes(MAX_IMAGE_BYTES - 3)
    parts = [base64.b64encode(exact[i : i + piece]).decode() for i in range(0, len(exact), piece)]
    assembler = UploadAssembler()
    outcomes = [assembler.add(PHONE, chunk(i, len(parts), p), T0) for i, p in enumerate(parts)]
    assert isinstance(outcomes[-1], ImageReady) and len(outcomes[-1].data) == MAX_IMAGE_BYTES
    over = exact + b"\x00" * 3
    parts = [base64.b64encode(over[i : i + piece]).decode() for i in range(0, len(over), piece)]
    outcomes = [
        assembler.add(PHONE, chunk(i, len(parts), p, upload_id="u2"), T0)
        for i, p in enumerate(parts)
    ]
    assert isinstance(outcomes[-1], UploadFailed) and "25 MiB" in outcomes[-1].reason


def test_an_oversized_stream_is_dropped_before_it_completes() -> None:
    assembler = UploadAssembler()
    big = base64.b64encode(bytes(MAX_IMAGE_BYTES // 2 + 300)).decode()
    assert isinstance(assembler.add(PHONE, chunk(0, 4, big), T0), ChunkAccepted)
    assert isinstance(assembler.add(PHONE, chunk(1, 4, big), T0), UploadFailed)
    assert len(assembler) == 0


def test_open_uploads_are_bounded() -> None:
    assembler = UploadAssembler()
    for n in range(MAX_OPEN_UPLOADS):
        assert isinstance(
            assembler.add(PHONE, chunk(0, 2, "QUJD", upload_id=f"u{n}"), T0), ChunkAccepted
        )
    refused = assembler.add(PHONE, chunk(0, 2, "QUJD", upload_id="one-more"), T0)
    assert isinstance(refused, UploadFailed) and "too many uploads" in refused.reason
    assert isinstance(assembler.add(PHONE, chunk(1, 2, "QUJD", upload_id="u0"), T0), ImageReady)


def test_too_many_chunks_is_refused() -> None:
    outcome = UploadAssembler().add(PHONE, chunk(0, 10**6, "QUJD"), T0)
    assert isinstance(outcome, UploadFailed) and "too many chunks" in outcome.reason


def test_image_ready_repr_hides_the_bytes() -> None:
    ready = ImageReady("s", PHONE, "f.png", "image/png", "t", b"\x01" * 1000)
    assert "\\x01" not in repr(ready)


# --- dedup window ----------------------------------------------------------------------------


def test_dedup_window_boundaries() -> None:
    dedup = ImageDedup()
    assert dedup.admit("s1", "h1", "caption", T0)
    assert not dedup.admit("s1", "h1", "caption", T0 + DEDUP_WINDOW - 0.001)
    # a suppressed duplicate does not extend the window
    assert dedup.admit("s1", "h1", "caption", T0 + DEDUP_WINDOW)
    assert not dedup.admit("s1", "h1", "caption", T0 + DEDUP_WINDOW + 1)


@pytest.mark.parametrize(
    "other", [("s2", "h1", "caption"), ("s1", "h2", "caption"), ("s1", "h1", "other caption")]
)
def test_dedup_needs_same_session_image_and_caption(other: tuple[str, str, str]) -> None:
    dedup = ImageDedup()
    assert dedup.admit("s1", "h1", "caption", T0)
    assert dedup.admit(*other, T0 + 1)


def test_dedup_keeps_at_most_the_newest_keys() -> None:
    dedup = ImageDedup()
    for n in range(DEDUP_MAX_KEYS + 1):
        dedup.remember("s", f"h{n}", "", T0 + n * 0.01)
    assert len(dedup) == DEDUP_MAX_KEYS
    assert not dedup.is_duplicate("s", "h0", "", T0 + 3)  # evicted: the oldest went
    assert dedup.is_duplicate("s", "h1", "", T0 + 3)


def test_dedup_sweep_and_deadline() -> None:
    dedup = ImageDedup()
    assert dedup.next_deadline() is None
    dedup.remember("s", "a", "", T0)
    dedup.remember("s", "b", "", T0 + 10)
    assert dedup.next_deadline() == T0 + DEDUP_WINDOW
    dedup.sweep(T0 + DEDUP_WINDOW)
    assert len(dedup) == 1 and dedup.next_deadline() == T0 + 10 + DEDUP_WINDOW


# --- safe names ------------------------------------------------------------------------------

NAME_CASES = [
    ("shot.png", "image/png", "1700000000123-shot.png"),
    ("photo.JPEG", "image/jpeg", "1700000000123-photo.jpg"),
    ("../../x", "image/png", "1700000000123-x.png"),
    ("..\\..\\windows\\x.jpg", "image/jpeg", "1700000000123-x.jpg"),
    (".bashrc", "image/png", "1700000000123-bashrc.png"),
    ("..", "image/png", "1700000000123-image.png"),
    ("", "image/jpeg", "1700000000123-image.jpg"),
    ("a\x00b.png", "image/png", "1700000000123-a_b.png"),
    ("фото 1.png", "image/png", "1700000000123-_____1.png"),
    ("日本.gif", "image/gif", "1700000000123-__.gif"),
    ("my pic$.webp", "image/webp", "1700000000123-my_pic_.webp"),
    ("scan.pdf", "application/pdf", "1700000000123-scan.pdf.jpg"),
    ("..hidden..png", "image/png", "1700000000123-hidden.png"),
]


@pytest.mark.parametrize(
    ("filename", "mime", "expected"), NAME_CASES, ids=[repr(c[0]) for c in NAME_CASES]
)
def test_safe_image_name(filename: str, mime: str, expected: str) -> None:
    assert safe_image_name(filename, mime, 1_700_000_000_123) == expected


@pytest.mark.parametrize(
    "filename",
    ["../../x", ".bashrc", "a/b/c", "\x00", "x" * 10_000, "é" * 300, "/etc/passwd", "....", "-rf"],
)
def test_safe_names_are_one_bounded_component(filename: str) -> None:
    name = safe_image_name(filename, "image/png", 5)
    assert "/" not in name and "\\" not in name and "\x00" not in name
    assert not name.startswith(".") and ".." not in name.split("-", 1)[1].rstrip(".png")[:1]
    assert name.startswith("5-") and name.isascii()
    assert len(name) <= len("5-") + MAX_NAME_STEM + len(".webp")


def test_extension_follows_the_content_before_the_mime_type() -> None:
    assert image_extension("image/jpeg", PNG) == ".png"
    assert image_extension("image/png", b"\xff\xd8\xff\xe0") == ".jpg"
    assert image_extension("", b"GIF89a...") == ".gif"
    assert image_extension("", b"RIFF\x00\x00\x00\x00WEBPVP8 ") == ".webp"
    assert image_extension(" IMAGE/PNG ", b"unknown") == ".png"
    assert image_extension("image/heic", b"") == ".jpg"


def test_injected_text() -> None:
    path = "/ws/.codedeck/uploads/1-x.png"
    assert injected_text("what is this?", path) == (
        "what is this?\n\n[Attached image: /ws/.codedeck/uploads/1-x.png — use the Read tool to view it]"
    )
    assert injected_text("", path) == "Please examine this image: /ws/.codedeck/uploads/1-x.png"
    assert injected_text("  \n", path) == "Please examine this image: /ws/.codedeck/uploads/1-x.png"


# --- Blossom command checks ------------------------------------------------------------------


def blossom(**overrides: Any) -> UploadImageBlossomCommand:
    payload: dict[str, Any] = {
        "type": "upload-image",
        "sessionId": "s1",
        "hash": "ab" * 32,
        "url": "https://blossom.example/ab",
        "key": "11" * 32,
        "iv": "22" * 12,
        "filename": "x.png",
        "mimeType": "image/png",
        "text": "",
        "sizeBytes": 1000,
        **overrides,
    }
    command = decode_phone_to_bridge(json.dumps(payload))
    assert isinstance(command, UploadImageBlossomCommand)
    return command


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, None),
        ({"url": "HTTPS://blossom.example/x"}, None),
        ({"url": "http://blossom.example/ab"}, "must be https"),
        ({"url": "http://localhost/ab"}, "must be https"),
        ({"url": "https:///nohost"}, "must be https"),
        ({"sizeBytes": MAX_IMAGE_BYTES}, None),
        ({"sizeBytes": MAX_IMAGE_BYTES + 1}, "too large"),
        ({"hash": "ab" * 31}, "hash must be"),
        ({"hash": "zz" * 32}, "hash must be"),
        ({"key": "11" * 16}, "key must be 64 hex"),
        ({"key": "gg" * 32}, "key must be 64 hex"),
        ({"iv": "2" * 23}, "iv must be"),
        ({"iv": "22" * 4}, "iv must be"),
        ({"iv": "xy" * 12}, "iv must be"),
    ],
)
def test_check_blossom_command(overrides: dict[str, Any], expected: str | None) -> None:
    result = check_blossom_command(blossom(**overrides))
    if expected is None:
        assert result is None
    else:
        assert result is not None and expected in result
        assert "11" * 32 not in result
