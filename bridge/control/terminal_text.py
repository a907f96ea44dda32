"""Text from the daemon or a phone, made safe to print on a terminal.

Everything the CLI and the daemon's answers show came from somewhere else, and parts of it from
phones (a phone chooses its own label). Terminal text is an attack surface: an escape sequence in
a label could rewrite the screen or the title bar, a bidi override could disguise an npub. Both
sides of the control socket pass every such string through :func:`safe_text`.
"""

from __future__ import annotations

from typing import Final

__all__ = ["safe_text"]

_MAX_TEXT: Final = 200
_BIDI: Final = (
    frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A)) | {0x200E, 0x200F}
)


def safe_text(value: object, *, limit: int = _MAX_TEXT) -> str:
    """``value`` as one printable line: controls and bidi overrides become ``?``; capped."""
    if value is None:
        return "?"
    text = value if isinstance(value, str) else str(value)
    cleaned = "".join(
        "?" if (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ord(ch) in _BIDI) else ch
        for ch in text[: limit + 1]
    )
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"
