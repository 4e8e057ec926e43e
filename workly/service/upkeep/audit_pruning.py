"""Audit pruning: entries older than WORKLY_AUDIT_RETENTION are deleted, a batch at a time."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from workly.clock import Clock
from workly.storage.contract import AuditStore

BATCH = 500


class AuditPruning:
    name = "audit pruning"

    def __init__(self, store: AuditStore, clock: Clock, retention: float, every: float = 300.0) -> None:
        """``retention``: seconds an entry is kept; 0 keeps them forever."""
        self._store = store
        self._clock = clock
        self._retention = retention
        self._every = every
        self.pruned = 0

    async def interval(self) -> float:
        return self._every if self._retention > 0 else 0

    async def run(self) -> None:
        cutoff = self._clock.now() - timedelta(seconds=self._retention)
        while pruned := await self._store.prune_audit(cutoff, BATCH):
            self.pruned += pruned
            await asyncio.sleep(0)  # let the hot paths in between batches
