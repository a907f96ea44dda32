"""systemd's notify protocol (``sd_notify``) without libsystemd.

When ``NOTIFY_SOCKET`` is set (``Type=notify`` units), the daemon sends ``READY=1`` once it
serves, ``STATUS=…`` lines, ``WATCHDOG=1`` pings, and ``STOPPING=1`` when it begins to shut
down. Anywhere else every call is a no-op. A failed send is logged once and never fatal: the
service must not die because its supervisor's socket went away.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

__all__ = ["Notifier"]

logger = logging.getLogger(__name__)


class Notifier:
    """Sends datagrams to ``$NOTIFY_SOCKET`` (abstract ``@…`` addresses included)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        raw = (env if env is not None else os.environ).get("NOTIFY_SOCKET", "")
        self._address: str | bytes | None = None
        if raw.startswith("@"):
            self._address = b"\0" + raw[1:].encode()
        elif raw.startswith("/"):
            self._address = raw
        self._warned = False

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def send(self, *lines: str) -> bool:
        """Send ``KEY=value`` lines in one datagram; False when disabled or it failed."""
        if self._address is None:
            return False
        payload = "\n".join(lines).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(self._address)
                sock.sendall(payload)
        except OSError as exc:
            if not self._warned:
                logger.warning("cannot notify systemd (%s)", exc.strerror or exc)
                self._warned = True
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        return self.send("READY=1", *((f"STATUS={status}",) if status else ()))

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")
