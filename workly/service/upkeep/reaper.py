"""The reaper: a task whose lease expired (the process that claimed it died or stalled)
returns to ready, or fails if that was its last attempt (UpkeepStore.reap_expired). It
runs in every process; the storage makes concurrent reapers split the work."""

from __future__ import annotations

import logging
from collections.abc import Callable

from workly.clock import Clock
from workly.metrics import Metrics
from workly.storage.contract import UpkeepStore

log = logging.getLogger("workly.housekeeping")


class Reaper:
    name = "reap"

    def __init__(
        self,
        store: UpkeepStore,
        clock: Clock,
        work_available: Callable[[], None],
        metrics: Metrics,
        every: float,
    ) -> None:
        self._store = store
        self._clock = clock
        self._work_available = work_available
        self._metrics = metrics
        self._every = every
        self.reaped = 0

    async def interval(self) -> float:
        return self._every

    async def run(self) -> None:
        while reaped := await self._store.reap_expired(self._clock.now()):
            self.reaped += reaped
            self._metrics.reaped.inc(reaped)
            log.warning("returned %d task(s) whose lease expired", reaped)
            self._work_available()
