"""Periodic database upkeep: the reaper, retention, and vacuum where the server does not.

Reaper: a task whose lease expired (the process that claimed it died or stalled)
returns to ready, or fails if that was its last attempt (Storage.reap_expired). It runs
in every process; the storage makes concurrent reapers split the work.

Retention: succeeded tasks older than WORKLY_RETENTION are deleted with their attempts,
in small batches; failed and canceled tasks stay until redriven or deleted. Events older
than that go once none of their deliveries is kept.

Recount: on PostgreSQL each queue keeps a counter of its deliveries in flight (the
claim's max_concurrency check). Only claims and results move it, so it cannot drift
while every process runs this version; the recount repairs it if it ever did (a process
of an older version running next to this one during an upgrade, a manual change).

Breaker probes: an open circuit breaker holds its receiver's tasks; once its cool-down
is over, one of them is released as the probe (Storage.release_probes, workly/breaker.py).

Counts: the tasks per queue and status are kept by triggers (migration 0014); on
PostgreSQL each statement appends its change, and the fold makes them one row per queue
and status again every couple of seconds, so reading them stays cheap.

Delivery history: the dispatcher's counts per queue, endpoint and minute (the dashboard's
charts, workly/delivery_stats.py) are written every few seconds and kept two hours.

Index rebuilds: on PostgreSQL the indexes of the churning tables grow with every task
ever stored, not with the tasks kept (retention empties pages but failed tasks stay in
them; workly/storage/postgres_indexes.py); every WORKLY_REINDEX_INTERVAL the ones grown
far past what their entries need are rebuilt without blocking anything.

Vacuum: on PostgreSQL a task leaves three row versions behind (ready, running,
finished). Until they are vacuumed, their index entries stay in front of the claim's
index scan, so every claim gets slower with every task delivered (measured: 0.3 ms
→ 12 ms after 40,000 tasks, docs/performance.md). Autovacuum normally handles it
(the migration tunes it for the tasks table); when the server runs with autovacuum
off, Workly vacuums its own tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from workly.clock import Clock
from workly.metrics import Metrics
from workly.periodic import run_every
from workly.service.delivery_history import DeliveryHistory
from workly.storage.base import Storage

log = logging.getLogger("workly.housekeeping")


class Housekeeper:
    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        *,
        reap_interval: float,
        work_available: Callable[[], None],
        vacuum_interval: float | None,
        retention: float = 0,
        prune_interval: float = 60.0,
        recount_interval: float = 60.0,
        auto_vacuum_interval: float = 10.0,
        metrics: Metrics | None = None,
        depth_interval: float = 15.0,
        probe_interval: float = 0.5,
        fold_interval: float = 2.0,
        history: DeliveryHistory | None = None,
        history_interval: float = 5.0,
        reindex_interval: float = 0.0,
    ) -> None:
        """``vacuum_interval``: seconds between vacuums; 0 = never; None = every
        ``auto_vacuum_interval`` seconds if the database does not vacuum by itself."""
        self._storage = storage
        self._clock = clock
        self._metrics = metrics or Metrics()
        self._depth_interval = depth_interval
        self._reap_interval = reap_interval
        self._work_available = work_available
        self._vacuum_interval = vacuum_interval
        self._auto_vacuum_interval = auto_vacuum_interval
        self._retention = retention
        self._prune_interval = prune_interval
        self._recount_interval = recount_interval
        self._probe_interval = probe_interval
        self._fold_interval = fold_interval
        self._history = history
        self._history_interval = history_interval
        self._reindex_interval = reindex_interval
        self.rebuilt: list[str] = []
        self.probes = 0
        self.recounted = 0
        self.pruned = 0
        self.pruned_events = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.vacuums = 0
        self.reaped = 0

    async def start(self) -> None:
        if self._reap_interval > 0:
            self._every(self._reap_interval, self._reap, "reap")
        if self._retention > 0:
            self._every(self._prune_interval, self._prune, "prune")
        if self._recount_interval > 0:
            self._every(self._recount_interval, self._recount, "recount")
        if self._probe_interval > 0:
            self._every(self._probe_interval, self._release_probes, "breaker probes")
        if self._depth_interval > 0:
            self._every(self._depth_interval, self._measure_depths, "queue depths")
        if self._fold_interval > 0:
            self._every(self._fold_interval, self._storage.fold_task_counts, "task counts")
        if self._reindex_interval > 0:
            self._every(self._reindex_interval, self._rebuild_indexes, "index rebuilds")
        if self._history is not None and self._history_interval > 0:
            self._every(self._history_interval, self._history.flush, "delivery history")
            self._every(self._prune_interval, self._history.prune, "delivery history pruning")
        interval = self._vacuum_interval
        if interval is None:
            interval = self._auto_vacuum_interval if await self._storage.needs_vacuum() else 0
            if interval:
                log.warning(
                    "PostgreSQL autovacuum is off: Workly vacuums its tables every %.0fs "
                    "(turn autovacuum on, or set WORKLY_VACUUM_INTERVAL)",
                    interval,
                )
        if interval > 0:
            self._every(interval, self._vacuum, "vacuum")

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _every(self, interval: float, job: Callable[[], Awaitable[None]], name: str) -> None:
        self._tasks.append(run_every(self._clock, interval, job, name, log))

    async def _reap(self) -> None:
        while reaped := await self._storage.reap_expired(self._clock.now()):
            self.reaped += reaped
            self._metrics.reaped.inc(reaped)
            log.warning("returned %d task(s) whose lease expired", reaped)
            self._work_available()

    async def _release_probes(self) -> None:
        """Open circuit breakers whose cool-down is over send one held task as a probe."""
        if released := await self._storage.release_probes(self._clock.now()):
            self.probes += released
            self._work_available()

    async def _prune(self) -> None:
        """Retention: succeeded tasks older than ``retention`` go, a small batch at a time,
        so the hot table stays small and no transaction holds locks for long."""
        cutoff = self._clock.now() - timedelta(seconds=self._retention)
        while pruned := await self._storage.prune_succeeded(cutoff, limit=500):
            self.pruned += pruned
            await asyncio.sleep(0)  # let the hot paths in between batches
        # Then events none of whose deliveries is kept any more.
        while pruned := await self._storage.prune_events(cutoff, limit=500):
            self.pruned_events += pruned
            await asyncio.sleep(0)

    async def _measure_depths(self) -> None:
        """The queue depth and endpoint health gauges: periodic queries in each process,
        never one per scrape."""
        self._metrics.set_queue_depths(await self._storage.list_queues())
        self._metrics.set_endpoint_states(await self._storage.count_endpoints_by_state())

    async def _recount(self) -> None:
        corrected = await self._storage.recount_running()
        if corrected:
            self.recounted += corrected
            log.warning("corrected the count of deliveries in flight of %d queue(s)", corrected)
            self._work_available()  # slots came free: claim now

    async def _rebuild_indexes(self) -> None:
        rebuilt = await self._storage.rebuild_bloated_indexes()
        self.rebuilt += rebuilt
        if rebuilt:
            self._metrics.index_rebuilds.inc(len(rebuilt))

    async def _vacuum(self) -> None:
        await self._storage.vacuum()
        self.vacuums += 1
