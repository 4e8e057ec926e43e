"""Enqueueing: concurrent requests share transactions (group commit), then wake dispatchers.

The API hands each request's tasks (one, or a batch of up to 1,000) to ``enqueue``;
requests that arrive while a transaction is in flight go into the next one together.
Each request is answered only after its own transaction committed. After each commit
``on_committed`` runs (the service's work_available: it wakes this process's dispatcher
directly and, on PostgreSQL, the other processes' through a coalesced NOTIFY), never
inside the transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from workly.batching import GroupCommitter
from workly.clock import Clock
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
    ) -> None:
        self._metrics = metrics or Metrics()
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
        stored = await self._storage.enqueue([task for tasks in requests for task in tasks], self._clock())
        self._metrics.commit_batch.labels("enqueue").observe(len(requests))
        created = [entry.task.queue for entry in stored if entry.created]
        for queue in created:
            self._metrics.enqueued.labels(queue).inc()
        if created:
            self._on_committed()
        answers, start = [], 0
        for tasks in requests:
            answers.append(stored[start : start + len(tasks)])
            start += len(tasks)
        return answers
