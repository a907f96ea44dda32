"""Blossom image downloads: fetch the encrypted blob over https, check it, decrypt it.

REFERENCE-BEHAVIOUR §1.13, in the order applied here:

1. the command itself (:func:`bridge.engine.sessions.uploads.check_blossom_command`): an https URL,
   ``sizeBytes`` at most 25 MiB, a 64-hex ``hash``, a 64-hex AES-256 ``key``, a hex ``iv``;
2. the download: https only (redirects too), at most :data:`MAX_REDIRECTS` hops, a
   ``Content-Length`` past the cap refused before reading, the body streamed and abandoned as
   soon as it passes the cap (``sizeBytes`` is the phone's claim, the cap is ours), the whole
   fetch within :data:`DOWNLOAD_TIMEOUT` seconds;
3. integrity: the sha256 of the *ciphertext* must equal ``hash``;
4. AES-256-GCM with the hex ``key`` / ``iv``; the tag is the last 16 bytes of the blob.

Each refusal raises :class:`BlossomError` with a text fit for a log line (it never contains the
key). The HTTP fetch is injectable (:data:`Fetcher`) so that callers and tests can swap the
transport; :func:`make_http_fetcher` is the real one (aiohttp; tests pass an ``ssl`` context that
trusts their own certificate).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Final
from urllib.parse import urljoin, urlsplit

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bridge.engine.sessions.uploads import MAX_IMAGE_BYTES, check_blossom_command
from bridge.protocol import UploadImageBlossomCommand

__all__ = [
    "DOWNLOAD_TIMEOUT",
    "MAX_REDIRECTS",
    "BlossomError",
    "Fetcher",
    "decrypt_blob",
    "fetch_blossom_image",
    "make_http_fetcher",
]

logger = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT: Final = 60.0
MAX_REDIRECTS: Final = 3
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_READ_SIZE: Final = 64 * 1024

Fetcher = Callable[[str, int], Awaitable[bytes]]
"""``(https url, max_bytes) -> body``; raises :class:`BlossomError` for any failure."""


class BlossomError(Exception):
    """A Blossom upload was refused; the message says why (and never holds the key)."""


def _is_https(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() == "https" and bool(parts.hostname)


def make_http_fetcher(*, ssl_context: ssl.SSLContext | None = None) -> Fetcher:
    """The real fetcher: aiohttp, https only, streamed under the byte cap.

    Args:
        ssl_context: the TLS trust to use (None: the system's default verification).
    """

    async def fetch(url: str, max_bytes: int) -> bytes:
        # only when a Blossom image is fetched: its import is slow, kept off every daemon start
        import aiohttp

        async with aiohttp.ClientSession(trust_env=False) as session:
            for _ in range(MAX_REDIRECTS + 1):
                if not _is_https(url):
                    raise BlossomError("the Blossom URL must be https")
                try:
                    async with session.get(
                        url, allow_redirects=False, ssl=ssl_context if ssl_context else True
                    ) as response:
                        if response.status in _REDIRECTS and "Location" in response.headers:
                            url = urljoin(url, response.headers["Location"])
                            continue
                        if response.status != 200:
                            raise BlossomError(
                                f"the Blossom server answered HTTP {response.status}"
                            )
                        length = response.content_length
                        if length is not None and length > max_bytes:
                            raise BlossomError(
                                f"the blob is too large ({length} bytes; the limit is {max_bytes})"
                            )
                        body = bytearray()
                        async for piece in response.content.iter_chunked(_READ_SIZE):
                            body += piece
                            if len(body) > max_bytes:
                                raise BlossomError(
                                    f"the blob is larger than the limit of {max_bytes} bytes"
                                )
                        return bytes(body)
                except aiohttp.ClientError as exc:
                    raise BlossomError(f"the download failed ({type(exc).__name__})") from None
            raise BlossomError(f"too many redirects (more than {MAX_REDIRECTS})")

    return fetch


def decrypt_blob(ciphertext: bytes, key_hex: str, iv_hex: str) -> bytes:
    """AES-256-GCM decryption; the tag is the last 16 bytes of `ciphertext`.

    Raises:
        BlossomError: the key or iv is malformed, or the tag does not verify.
    """
    try:
        key = bytes.fromhex(key_hex)
        iv = bytes.fromhex(iv_hex)
    except ValueError:
        raise BlossomError("the key and iv must be hex") from None
    if len(key) != 32:
        raise BlossomError("the key must be 32 bytes (AES-256)")
    if not 8 <= len(iv) <= 128:
        raise BlossomError("the iv must be 8 to 128 bytes")
    if len(ciphertext) < 16:
        raise BlossomError("the blob is too short to hold an AES-GCM tag")
    try:
        return AESGCM(key).decrypt(iv, ciphertext, None)
    except InvalidTag:
        raise BlossomError(
            "the image could not be decrypted (wrong key or iv, or a corrupted blob)"
        ) from None


async def fetch_blossom_image(
    command: UploadImageBlossomCommand,
    *,
    fetch: Fetcher | None = None,
    timeout: float = DOWNLOAD_TIMEOUT,
    max_bytes: int = MAX_IMAGE_BYTES,
) -> bytes:
    """Download, verify and decrypt the image of a Blossom ``upload-image``.

    Args:
        command: the decoded command.
        fetch: the transport (default: :func:`make_http_fetcher` with system TLS trust).
        timeout: seconds for the whole download.
        max_bytes: the cap on the downloaded body (25 MiB).

    Returns:
        The decrypted image bytes.

    Raises:
        BlossomError: any refusal, with a readable reason.
    """
    problem = check_blossom_command(command)
    if problem is not None:
        raise BlossomError(problem)
    if command.sizeBytes > max_bytes:
        raise BlossomError(f"the image is too large ({command.sizeBytes} bytes)")
    fetcher = fetch if fetch is not None else make_http_fetcher()
    host = urlsplit(command.url).hostname
    try:
        async with asyncio.timeout(timeout):
            blob = await fetcher(command.url, max_bytes)
    except TimeoutError:
        raise BlossomError(f"the download timed out after {timeout:g} s") from None
    except OSError as exc:
        raise BlossomError(f"the download failed ({type(exc).__name__})") from None
    if len(blob) > max_bytes:
        raise BlossomError(f"the blob is larger than the limit of {max_bytes} bytes")
    digest = hashlib.sha256(blob).hexdigest()
    if not hmac.compare_digest(digest, command.hash.lower()):
        raise BlossomError("the blob's sha256 does not match the hash the phone sent")
    image = decrypt_blob(blob, command.key, command.iv)
    logger.debug("= blossom image from %s: %d bytes", host, len(image))
    return image
