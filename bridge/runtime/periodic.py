"""The daemon's periodic work, every 30 s on the monotonic clock, starting 30 s after boot.

Each round:

- scan the workspace roots for project folders (the heartbeat's ``folders``; boot scanned once);
- re-send durable replies that a relay still lacks after a minute (a relay that refused or never
  answered while staying connected gets no reconnect retry: this reaches it);
- once a day, apply the transcript retention (``transcript_keep_last`` lines per closed session);
- refresh systemd's ``STATUS=`` line.

Supervision: each job runs on its own, and a job that raises is logged at ERROR with its
traceback and tried again next round — one broken job (a folder that cannot be read, a database
that is briefly busy) must not stop the others. The loop itself is a *critical* task of the
daemon: should it end, the daemon stops, rather than live on without its periodic work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["PERIODIC_INTERVAL", "RETENTION_INTERVAL", "PeriodicWork"]

logger = logging.getLogger(__name__)

PERIODIC_INTERVAL = 30.0
RETENTION_INTERVAL = 24 * 3600.0

Job = Callable[[], Awaitable[object]]


class PeriodicWork:
    """Runs the periodic jobs (see the module docstring).

    Args:
        scan_folders: the workspace scan.
        retry_outbox: re-sends durable replies older than a minute.
        sweep_transcripts: the daily retention.
        refresh_status: the ``STATUS=`` refresh (synchronous).
        monotonic: the monotonic clock (seconds).
        interval: seconds between rounds.
    """

    def __init__(
        self,
        *,
        scan_folders: Job,
        retry_outbox: Job,
        sweep_transcripts: Job,
        refresh_status: Callable[[], None],
        monotonic: Callable[[], float],
        interval: float = PERIODIC_INTERVAL,
    ) -> None:
        self._jobs: tuple[tuple[str, Job], ...] = (
            ("folder scan", scan_folders),
            ("outbox retry", retry_outbox),
        )
        self._sweep = sweep_transcripts
        self._refresh_status = refresh_status
        self._monotonic = monotonic
        self._interval = interval
        self._next_sweep = monotonic()
        self.rounds = 0

    async def run(self) -> None:
        """Forever: sleep a round, do it."""
        while True:
            await asyncio.sleep(self._interval)
            await self.run_round()

    async def run_round(self) -> None:
        """One round of every job that is due."""
        for name, job in self._jobs:
            await self._supervised(name, job)
        if self._monotonic() >= self._next_sweep:
            self._next_sweep = self._monotonic() + RETENTION_INTERVAL
            await self._supervised("transcript retention", self._sweep)
        try:
            self._refresh_status()
        except Exception:
            logger.exception("! periodic job status refresh failed")
        self.rounds += 1

    @staticmethod
    async def _supervised(name: str, job: Job) -> None:
        try:
            await job()
        except Exception:
            logger.exception("! periodic job %s failed; it runs again next round", name)
