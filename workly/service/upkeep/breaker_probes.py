"""Breaker probes: an open circuit breaker holds its receiver's tasks; once its cool-down
is over, one of them is released as the probe (UpkeepStore.release_probes, workly/breaker.py)."""

from __future__ import annotations

from collections.abc import Callable

from workly.clock import Clock
from workly.storage.contract import UpkeepStore


class BreakerProbes:
    name = "breaker probes"

    def __init__(
        self, store: UpkeepStore, clock: Clock, work_available: Callable[[], None], every: float
    ) -> None:
        self._store = store
        self._clock = clock
        self._work_available = work_available
        self._every = every
        self.probes = 0

    async def interval(self) -> float:
        return self._every

    async def run(self) -> None:
        if released := await self._store.release_probes(self._clock.now()):
            self.probes += released
            self._work_available()
