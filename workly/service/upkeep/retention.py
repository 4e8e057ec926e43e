"""Retention (docs/retention.md): finished tasks expire with their attempts, a small batch
at a time so the hot table stays small and no transaction holds locks for long; then the
events none of whose deliveries is left.

Succeeded tasks go after WORKLY_RETENTION, failed and canceled ones after
WORKLY_FAILED_RETENTION, unless their queue or tenant keeps a retention of its own, which
then applies to every outcome (the shorter when both do)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial

from workly.clock import Clock
from workly.storage.contract import RetentionStore

BATCH = 500


class Retention:
    name = "prune"

    def __init__(
        self, store: RetentionStore, clock: Clock, retention: float, failed_retention: float = 0,
        every: float = 60.0,
    ) -> None:  # fmt: skip
        """``retention``, ``failed_retention``: seconds a succeeded, a failed or canceled task
        is kept; 0 keeps them forever."""
        self._store = store
        self._clock = clock
        self._retention = retention
        self._failed_retention = failed_retention
        self._every = every
        self.pruned = 0
        self.pruned_events = 0

    async def interval(self) -> float:
        return self._every  # a queue's or a tenant's own retention may apply whatever the settings

    async def run(self) -> None:
        now = self._clock.now()
        store = self._store
        if self._retention:
            self.pruned += await _in_batches(store.prune_succeeded, _before(now, self._retention))
        if self._failed_retention:
            self.pruned += await _in_batches(store.prune_failed, _before(now, self._failed_retention))
        for override in await store.retention_overrides():
            cutoff = _before(now, override.seconds)
            if override.kind == "queue":
                self.pruned += await _in_batches(partial(store.prune_queue, override.name), cutoff)
            else:
                self.pruned += await _in_batches(partial(store.prune_tenant, override.name), cutoff)
                self.pruned_events += await _in_batches(
                    partial(store.prune_tenant_events, override.name), cutoff
                )
        if self._retention:
            self.pruned_events += await _in_batches(store.prune_events, _before(now, self._retention))
        await store.prune_retired_queues()


def _before(now: datetime, seconds: float) -> datetime:
    return now - timedelta(seconds=seconds)


async def _in_batches(prune: Callable[[datetime, int], Awaitable[int]], before: datetime) -> int:
    total = 0
    while pruned := await prune(before, BATCH):
        total += pruned
        await asyncio.sleep(0)  # let the hot paths in between batches
    return total
