"""The recount: on PostgreSQL each queue keeps a counter of its deliveries in flight (the
claim's max_concurrency check). Only claims and results move it, so it cannot drift while
every process runs this version; the recount repairs it if it ever did (a process of an
older version running next to this one during an upgrade, a manual change)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from workly.storage.contract import UpkeepStore

log = logging.getLogger("workly.housekeeping")


class RunningRecount:
    name = "recount"

    def __init__(self, store: UpkeepStore, work_available: Callable[[], None], every: float = 60.0) -> None:
        self._store = store
        self._work_available = work_available
        self._every = every
        self.recounted = 0

    async def interval(self) -> float:
        return self._every

    async def run(self) -> None:
        corrected = await self._store.recount_running()
        if corrected:
            self.recounted += corrected
            log.warning("corrected the count of deliveries in flight of %d queue(s)", corrected)
            self._work_available()  # slots came free: claim now
