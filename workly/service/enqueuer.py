"""Enqueueing: concurrent requests share transactions (group commit), then wake dispatchers.

The API hands each request's tasks (one, or a batch of up to 1,000) to ``enqueue``;
requests that arrive while a transaction is in flight go into the next one together.
Each request is answered only after its own transaction committed. After each commit
``on_committed`` runs (the service's work_available: it wakes this process's dispatcher
directly and, on PostgreSQL, the other processes' through a coalesced NOTIFY), never
inside the transaction.

Eager dispatch: with a dispatcher in this process, each transaction takes the slots it
offers, the storage leases what a claim would take at once (Storage.enqueue), and those
tasks go straight to the dispatcher; only what stays ready ends in ``on_committed``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from workly.batching import GroupCommitter
from workly.clock import Clock
from workly.dispatch.dispatcher import Dispatcher
from workly.metrics import Metrics
from workly.models import Enqueued, NewTask
from workly.storage.base import Storage


class Enqueuer:
    def __init__(
        self,
        storage: Storage,
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
        self._metrics.commit_batch.labels("enqueue").observe(len(requests))
        created = [entry.task.queue for entry in stored if entry.created]
        for queue in created:
            self._metrics.enqueued.labels(queue).inc()
        if any(entry.created and entry.leased is None for entry in stored):
            self._on_committed()
        answers, start = [], 0
        for tasks in requests:
            answers.append(stored[start : start + len(tasks)])
            start += len(tasks)
        return answers

    async def _store(self, tasks: list[NewTask]) -> list[Enqueued]:
        dispatcher = self._dispatcher
        offer = None if dispatcher is None else dispatcher.offer(len(tasks))
        if dispatcher is None or offer is None:
            return await self._storage.enqueue(tasks, self._clock())
        stored: list[Enqueued] = []
        try:
            stored = await self._storage.enqueue(tasks, self._clock(), offer)
        finally:
            # Also when it failed: nothing is leased then (the transaction rolled back, or
            # the reaper returns what an unknown outcome leased), and the slots are free.
            leased = [entry.leased for entry in stored if entry.leased is not None]
            left = sorted({entry.task.queue for entry in stored if entry.created and entry.leased is None})
            dispatcher.adopt(offer, leased, left)
        return stored
