"""systemd's notify protocol (``sd_notify``) without libsystemd.

When ``NOTIFY_SOCKET`` is set (``Type=notify`` units), the daemon sends ``READY=1`` once it
serves, ``STATUS=…`` lines, ``WATCHDOG=1`` pings, and ``STOPPING=1`` when it begins to shut
down. Anywhere else every call is a no-op. A failed send is logged once and never fatal: the
service must not die because its supervisor's socket went away.

The watchdog (``WatchdogSec=``): :func:`run_watchdog` pings from the event loop, so a loop that
is stuck stops pinging and systemd restarts the service; :func:`watchdog_interval` reads how
often to ping from the environment systemd set.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Mapping

__all__ = ["Notifier", "StatusReporter", "run_watchdog", "watchdog_interval"]

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


class StatusReporter:
    """Keeps ``STATUS=`` current: sends the composed line only when it changed."""

    def __init__(self, notifier: Notifier, compose: Callable[[], str]) -> None:
        self._notifier = notifier
        self._compose = compose
        self._last: str | None = None

    def refresh(self) -> None:
        if not self._notifier.enabled:
            return
        text = self._compose()
        if text != self._last:
            self._last = text
            self._notifier.status(text)


# --- the watchdog --------------------------------------------------------------------------------


def watchdog_interval(env: Mapping[str, str], pid: int) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings: half of ``$WATCHDOG_USEC``, as sd_watchdog_enabled(3)
    advises; None when systemd asked for no watchdog.

    ``$WATCHDOG_PID``, when set, names the process the watchdog is for: another pid means the
    variables were inherited from a parent and are not ours to answer.
    """
    raw = env.get("WATCHDOG_USEC", "").strip()
    if not raw.isdigit() or int(raw) == 0:
        return None
    owner = env.get("WATCHDOG_PID", "").strip()
    if owner and (not owner.isdigit() or int(owner) != pid):
        return None
    return int(raw) / 1_000_000 / 2


async def run_watchdog(
    notifier: Notifier, interval: float, *, on_tick: Callable[[], None] | None = None
) -> None:
    """Send ``WATCHDOG=1`` every `interval` seconds until cancelled.

    The pings come from the event loop on purpose (not from a thread): a loop that is blocked or
    starved stops pinging, and systemd kills and restarts the service after ``WatchdogSec=``.
    `on_tick` (the daemon's STATUS refresh) runs after each ping; an error in it is logged and
    never stops the pings.
    """
    while True:
        notifier.watchdog()
        if on_tick is not None:
            try:
                on_tick()
            except Exception:
                logger.exception("! watchdog tick failed")
        await asyncio.sleep(interval)
