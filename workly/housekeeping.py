"""Periodic database upkeep that keeps the hot paths fast.

Vacuum: on PostgreSQL a task leaves three row versions behind (ready, running,
finished). Until they are vacuumed, their index entries stay in front of the claim's
index scan, so every claim gets slower with every task delivered (measured: 0.3 ms
→ 12 ms after 40,000 tasks, docs/performance.md). Autovacuum normally handles it
(the migration tunes it for the tasks table); when the server runs with autovacuum
off, Workly vacuums its own tables every ``interval`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from workly.storage.base import Storage

log = logging.getLogger("workly.housekeeping")


class Housekeeper:
    def __init__(self, storage: Storage, vacuum_interval: float | None, auto_interval: float = 10.0) -> None:
        """``vacuum_interval``: seconds between vacuums; 0 = never; None = every
        ``auto_interval`` seconds if the database does not vacuum by itself."""
        self._storage = storage
        self._vacuum_interval = vacuum_interval
        self._auto_interval = auto_interval
        self._task: asyncio.Task[None] | None = None
        self.vacuums = 0

    async def start(self) -> None:
        interval = self._vacuum_interval
        if interval is None:
            interval = self._auto_interval if await self._storage.needs_vacuum() else 0
            if interval:
                log.warning(
                    "PostgreSQL autovacuum is off: Workly vacuums its tables every %.0fs "
                    "(turn autovacuum on, or set WORKLY_VACUUM_INTERVAL)",
                    interval,
                )
        if interval > 0:
            self._task = asyncio.create_task(self._vacuum_every(interval), name="workly-housekeeping")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _vacuum_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self._storage.vacuum()
                self.vacuums += 1
            except Exception as exc:
                log.warning("vacuum failed (retrying in %.0fs): %s", interval, exc)
