"""Retention: succeeded tasks older than WORKLY_RETENTION are deleted with their attempts,
a small batch at a time, so the hot table stays small and no transaction holds locks for
long; failed and canceled tasks stay until redriven or deleted. Then events go once none
of their deliveries is kept."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from workly.clock import Clock
from workly.storage.contract import UpkeepStore

BATCH = 500


class Retention:
    name = "prune"

    def __init__(self, store: UpkeepStore, clock: Clock, retention: float, every: float = 60.0) -> None:
        """``retention``: seconds a succeeded task is kept; 0 keeps them forever."""
        self._store = store
        self._clock = clock
        self._retention = retention
        self._every = every
        self.pruned = 0
        self.pruned_events = 0

    async def interval(self) -> float:
        return self._every if self._retention > 0 else 0

    async def run(self) -> None:
        cutoff = self._clock.now() - timedelta(seconds=self._retention)
        while pruned := await self._store.prune_succeeded(cutoff, limit=BATCH):
            self.pruned += pruned
            await asyncio.sleep(0)  # let the hot paths in between batches
        while pruned := await self._store.prune_events(cutoff, limit=BATCH):
            self.pruned_events += pruned
            await asyncio.sleep(0)
