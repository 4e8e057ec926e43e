"""Enqueueing: concurrent requests share transactions (group commit), then wake dispatchers.

The API hands each request's tasks (one, or a batch of up to 1,000) to ``enqueue``;
requests that arrive while a transaction is in flight go into the next one together.
Each request is answered only after its own transaction committed. After each commit
``on_committed`` runs (the service's work_available: it wakes this process's dispatcher
directly and, on PostgreSQL, the other processes' through a coalesced NOTIFY), never
inside the transaction.

Eager dispatch: with a dispatcher in this process, each transaction takes the slots it
offers, the storage leases what a claim would take at once (TaskStore.enqueue), and those
tasks go straight to the dispatcher; only what stays ready ends in ``on_committed``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from workly.batching import GroupCommitter
from workly.clock import Clock
from workly.dispatch.dispatcher import Dispatcher
from workly.metrics import Metrics
from workly.models import ClaimedTask, Enqueued, LeaseOffer, NewTask
from workly.storage.tasks import may_lease_new

log = logging.getLogger("workly.enqueue")


class EnqueueStore(Protocol):
    """What the enqueuer needs of the TaskStore role (tests give a stand-in of these alone)."""

    async def enqueue(
        self, tasks: Sequence[NewTask], now: datetime, offer: LeaseOffer | None = None
    ) -> list[Enqueued]: ...

    async def leased_tasks(self, ids: Sequence[str], lease_token: str) -> list[ClaimedTask]: ...


class Enqueuer:
    def __init__(
        self,
        storage: EnqueueStore,
        clock: Clock,
        on_committed: Callable[[], None],
        max_requests_per_commit: int = 200,
        metrics: Metrics | None = None,
        dispatcher: Dispatcher | None = None,
    ) -> None:
        self._metrics = metrics or Metrics()
        self._dispatcher = dispatcher  # None: an API-only process, nothing is leased here
        self._storage = storage
        self._clock = clock
        self._on_committed = on_committed
        self._committer: GroupCommitter[Sequence[NewTask], list[Enqueued]] = GroupCommitter(
            self._flush,
            max_batch=max_requests_per_commit,
        )

    @property
    def commits(self) -> int:
        return self._committer.batches

    @property
    def requests(self) -> int:
        return self._committer.items

    async def enqueue(self, tasks: Sequence[NewTask]) -> list[Enqueued]:
        return await self._committer.submit(tasks)

    async def drain(self) -> None:
        await self._committer.drain()

    async def _flush(self, requests: Sequence[Sequence[NewTask]]) -> list[list[Enqueued]]:
        stored = await self._store([task for request in requests for task in request])
        self._metrics.commit_batch_of("enqueue").observe(len(requests))
        created = [entry.task.queue for entry in stored if entry.created]
        for queue in created:
            self._metrics.enqueued_of(queue).inc()
        if any(entry.created and entry.leased is None for entry in stored):
            self._on_committed()
        answers, start = [], 0
        for tasks in requests:
            answers.append(stored[start : start + len(tasks)])
            start += len(tasks)
        return answers

    async def _store(self, tasks: list[NewTask]) -> list[Enqueued]:
        since = self._clock.monotonic()  # before now: where a lease taken here may begin
        now = self._clock.now()
        dispatcher = self._dispatcher
        wanted = 0 if dispatcher is None else sum(1 for task in tasks if may_lease_new(task, now))
        offer = dispatcher.offer(wanted, since) if dispatcher is not None and wanted else None
        if dispatcher is None or offer is None:
            return await self._storage.enqueue(tasks, now)
        try:
            stored = await self._storage.enqueue(tasks, now, offer)
        except Exception:
            # The commit may have gone through (a connection lost while it did): deliver
            # what it leased rather than leave it to the reaper, which would count an attempt.
            dispatcher.adopt(offer, await self._leased_anyway(tasks, offer))
            raise
        except BaseException:
            dispatcher.adopt(offer, [])  # cancelled: what it leased comes back through the reaper
            raise
        dispatcher.adopt(offer, [entry.leased for entry in stored if entry.leased is not None])
        return stored

    async def _leased_anyway(self, tasks: list[NewTask], offer: LeaseOffer) -> list[ClaimedTask]:
        try:
            return await self._storage.leased_tasks([task.id for task in tasks], offer.lease_token)
        except Exception as exc:
            log.warning("could not look up what a failed enqueue leased (the reaper returns it): %s", exc)
            return []
