"""``Content-Length`` framing: exact byte-level cases, no I/O."""

from __future__ import annotations

import contextlib
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.control.framing import (
    MAX_BODY_BYTES,
    MAX_HEADER_BYTES,
    FrameDecoder,
    FramingError,
    encode_frame,
)

BODY = b'{"jsonrpc":"2.0","id":1,"method":"status"}'


def test_encode_frame_prefixes_the_length() -> None:
    assert encode_frame(b"{}") == b"Content-Length: 2\r\n\r\n{}"


def test_encode_frame_refuses_an_oversize_body() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        encode_frame(b"x" * (MAX_BODY_BYTES + 1))


def test_one_frame_in_one_read() -> None:
    assert FrameDecoder().feed(encode_frame(BODY)) == [BODY]


def test_a_frame_split_byte_by_byte() -> None:
    decoder = FrameDecoder()
    out: list[bytes] = []
    frame = encode_frame(BODY)
    for i in range(len(frame)):
        out += decoder.feed(frame[i : i + 1])
        assert decoder.in_frame == (i < len(frame) - 1)
    assert out == [BODY]
    assert decoder.buffered == 0


def test_split_inside_the_separator_and_the_body() -> None:
    decoder = FrameDecoder()
    frame = encode_frame(BODY)
    cut = frame.index(b"\r\n\r\n") + 2
    assert decoder.feed(frame[:cut]) == []
    assert decoder.feed(frame[cut : cut + 5]) == []
    assert decoder.feed(frame[cut + 5 :]) == [BODY]


def test_several_frames_in_one_read_keep_their_order_and_the_rest() -> None:
    decoder = FrameDecoder()
    data = encode_frame(b"[1]") + encode_frame(b"[2]") + encode_frame(b"[3]")[:-1]
    assert decoder.feed(data) == [b"[1]", b"[2]"]
    assert decoder.in_frame
    assert decoder.feed(b"]") == [b"[3]"]


def test_an_empty_body_is_a_frame() -> None:
    assert FrameDecoder().feed(b"Content-Length: 0\r\n\r\n") == [b""]


@pytest.mark.parametrize(
    "header",
    [
        b"content-length: 2",
        b"CONTENT-LENGTH:2",
        b"Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8",
        b"Content-Type: application/json; charset=UTF8\r\nContent-Length: 2",
        b"Content-Length: 2\r\nX-Trace: abc",
    ],
    ids=["lower", "no-space", "lsp-content-type", "type-first", "unknown-header"],
)
def test_accepted_headers(header: bytes) -> None:
    assert FrameDecoder().feed(header + b"\r\n\r\n{}") == [b"{}"]


BAD_HEADERS = [
    (b"Content-Length: -2", "invalid Content-Length"),
    (b"Content-Length: +2", "invalid Content-Length"),
    (b"Content-Length: 2x", "invalid Content-Length"),
    (b"Content-Length: ", "invalid Content-Length"),
    (b"Content-Length: \xd9\xa2", "not ASCII"),
    (b"Content-Length: 2\r\nContent-Length: 2", "duplicate Content-Length"),
    (b"Content-Type: application/json", "missing Content-Length"),
    (b"Content-Length 2", "malformed header"),
    (b" Content-Length: 2", "malformed header"),
    (b"", "malformed header"),
    (b"Content-Length: 2\r\nContent-Type: text/json; charset=latin-1", "unsupported charset"),
    (b"Content-Length: 9999999999999", "invalid Content-Length"),
]


@pytest.mark.parametrize(("header", "message"), BAD_HEADERS, ids=[m for _, m in BAD_HEADERS])
def test_bad_headers_are_framing_errors(header: bytes, message: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FramingError, match=message) as info:
        decoder.feed(header + b"\r\n\r\n{}")
    assert not info.value.too_large


def test_an_endless_header_is_refused_without_a_separator() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FramingError, match="header block too long"):
        decoder.feed(b"X" * (MAX_HEADER_BYTES + 1))


def test_a_long_header_block_with_separator_is_refused() -> None:
    header = b"Content-Length: 2\r\nX: " + b"a" * MAX_HEADER_BYTES
    with pytest.raises(FramingError, match="header block too long"):
        FrameDecoder().feed(header + b"\r\n\r\n{}")


def test_an_oversize_body_is_refused_before_it_is_buffered() -> None:
    decoder = FrameDecoder(max_body=10)
    with pytest.raises(FramingError, match="exceeds the 10-byte limit") as info:
        decoder.feed(b"Content-Length: 11\r\n\r\n")
    assert info.value.too_large
    assert decoder.buffered == 0


def test_the_default_cap_is_one_mebibyte() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"Content-Length: %d\r\n\r\n" % MAX_BODY_BYTES) == []
    with pytest.raises(FramingError):
        FrameDecoder().feed(b"Content-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1))


def test_bodies_before_an_error_are_handed_over_and_the_decoder_stays_broken() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FramingError) as info:
        decoder.feed(encode_frame(b"[1]") + encode_frame(b"[2]") + b"Bogus\r\n\r\n")
    assert info.value.bodies == [b"[1]", b"[2]"]
    with pytest.raises(FramingError) as again:
        decoder.feed(encode_frame(b"[3]"))
    assert again.value.bodies == []


@given(
    bodies=st.lists(st.binary(max_size=300), max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=10),
)
def test_any_split_of_a_stream_yields_the_same_bodies(bodies: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(body) for body in bodies)
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    decoder = FrameDecoder()
    out: list[bytes] = []
    for start, end in itertools.pairwise(points):
        out += decoder.feed(stream[start:end])
    assert out == bodies
    assert not decoder.in_frame


@given(st.binary(max_size=200))
def test_arbitrary_bytes_parse_or_raise_framing_error(data: bytes) -> None:
    with contextlib.suppress(FramingError):
        FrameDecoder().feed(data)
