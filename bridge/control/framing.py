"""``Content-Length`` framing for the control socket, sans-I/O.

The control socket carries JSON-RPC 2.0 bodies framed the way the Language Server Protocol frames
them (and the Desiide orchestrator, whose protocol ours follows)::

    Content-Length: 52\\r\\n
    \\r\\n
    {"jsonrpc":"2.0","id":1,"method":"status","params":{}}

Why this and not newline-delimited JSON: a length prefix lets the reader reject an oversize body
*before* buffering it, and it is what every JSON-RPC tool (``lsp-devtools``, editors' clients)
already speaks, which makes the socket easy to poke at when debugging.

Rules, chosen once here:

- Header lines end with ``\\r\\n``; the header block ends with an empty line. Header names are
  case-insensitive. ``Content-Length`` is required, exactly once, decimal digits only.
  ``Content-Type`` is optional (LSP clients send it); when present its charset must be UTF-8.
  Other headers are ignored, as LSP allows.
- The header block is capped at `MAX_HEADER_BYTES` and a body at `MAX_BODY_BYTES` (1 MiB: the
  largest legitimate message, a ``status`` with many sessions, is a few kilobytes).
- A framing error is not recoverable: once the byte stream is out of step there is no safe place
  to resume, so the decoder refuses further input and the caller answers once and closes. (A body
  that is merely not JSON is not a framing error; that is the JSON-RPC layer's business.)

The decoder is a plain object fed with bytes, in the style of h11: it never reads a socket, so the
split-frame and several-frames-per-read cases are exact unit tests.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "FrameDecoder",
    "FramingError",
    "encode_frame",
]

MAX_BODY_BYTES: Final = 1 << 20
"""The largest body accepted (1 MiB)."""

MAX_HEADER_BYTES: Final = 4096
"""The largest header block accepted, separator included."""

_SEPARATOR: Final = b"\r\n\r\n"
_UTF8_NAMES: Final = frozenset({"utf-8", "utf8"})


class FramingError(Exception):
    """The byte stream is not validly framed; the connection cannot continue.

    Attributes:
        too_large: True when the frame was well formed but over the size cap (the peer gets an
            "invalid request" answer rather than a "parse error").
        bodies: complete bodies that preceded the error in the same `FrameDecoder.feed` call;
            they are valid and should be handled before the connection is closed.
    """

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large
        self.bodies: list[bytes] = []


def encode_frame(body: bytes) -> bytes:
    """Frame one UTF-8 JSON body.

    Raises:
        ValueError: the body is over `MAX_BODY_BYTES` (the peer would refuse it).
    """
    if len(body) > MAX_BODY_BYTES:
        raise ValueError(f"message of {len(body)} bytes exceeds the {MAX_BODY_BYTES}-byte limit")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _parse_headers(block: bytes, max_body: int) -> int:
    """The body length announced by a header block (without its final blank line)."""
    try:
        text = block.decode("ascii")
    except UnicodeDecodeError:
        raise FramingError("header is not ASCII") from None
    length: int | None = None
    for line in text.split("\r\n"):
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise FramingError(f"malformed header line {line[:40]!r}")
        key = name.lower()
        value = value.strip()
        if key == "content-length":
            if length is not None:
                raise FramingError("duplicate Content-Length header")
            if not value.isdigit() or not value.isascii() or len(value) > 12:
                raise FramingError(f"invalid Content-Length {value[:20]!r}")
            length = int(value)
        elif key == "content-type":
            _check_content_type(value)
    if length is None:
        raise FramingError("missing Content-Length header")
    if length > max_body:
        raise FramingError(
            f"message of {length} bytes exceeds the {max_body}-byte limit", too_large=True
        )
    return length


def _check_content_type(value: str) -> None:
    for param in value.split(";")[1:]:
        key, _, charset = param.partition("=")
        if key.strip().lower() == "charset" and charset.strip().strip('"').lower() not in (
            _UTF8_NAMES
        ):
            raise FramingError(f"unsupported charset {charset.strip()[:20]!r}; use utf-8")


class FrameDecoder:
    """Turns a byte stream into complete message bodies.

    Feed it whatever a read returned; it returns the bodies completed by those bytes (zero, one
    or several) and keeps the rest. After a `FramingError` it stays broken: every later `feed`
    raises again, so a caller cannot accidentally resume a desynchronised stream.
    """

    def __init__(self, *, max_body: int = MAX_BODY_BYTES) -> None:
        self._buffer = bytearray()
        self._max_body = max_body
        self._need: int | None = None  # body length once the header block was parsed
        self._error: FramingError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete body."""
        return len(self._buffer)

    @property
    def in_frame(self) -> bool:
        """True when bytes of an unfinished frame are pending (EOF now would cut a message)."""
        return bool(self._buffer) or self._need is not None

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return the bodies they complete, in order.

        Raises:
            FramingError: the stream is malformed or a frame is too large; its ``bodies`` holds
                the complete bodies that came before the fault. Every later call raises again
                (with no bodies).
        """
        if self._error is not None:
            self._error.bodies = []
            raise self._error
        self._buffer += data
        bodies: list[bytes] = []
        try:
            while True:
                if self._need is None:
                    end = self._buffer.find(_SEPARATOR)
                    if end < 0:
                        if len(self._buffer) > MAX_HEADER_BYTES:
                            raise FramingError("header block too long")
                        return bodies
                    if end + len(_SEPARATOR) > MAX_HEADER_BYTES:
                        raise FramingError("header block too long")
                    self._need = _parse_headers(bytes(self._buffer[:end]), self._max_body)
                    del self._buffer[: end + len(_SEPARATOR)]
                if len(self._buffer) < self._need:
                    return bodies
                bodies.append(bytes(self._buffer[: self._need]))
                del self._buffer[: self._need]
                self._need = None
        except FramingError as exc:
            exc.bodies = bodies
            self._error = exc
            self._buffer.clear()
            raise
