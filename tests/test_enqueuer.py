"""Enqueueing through group commit, on both backends: requests share transactions, each is
answered after its own commit, and dispatchers are woken only after commits that stored work."""

from __future__ import annotations

import asyncio

from tests.storage.helpers import new
from tests.support.clock import VirtualClock
from workly.service.enqueuer import Enqueuer
from workly.storage.contract import Storage


async def test_concurrent_requests_share_commits(storage: Storage, clock: VirtualClock) -> None:
    wakes: list[int] = []
    enqueuer = Enqueuer(storage.tasks, clock, lambda: wakes.append(enqueuer.commits))
    requests = [[new()] for _ in range(40)] + [[new() for _ in range(5)]]
    answers = await asyncio.gather(*(enqueuer.enqueue(tasks) for tasks in requests))
    assert [[entry.task.id for entry in answer] for answer in answers] == [
        [t.id for t in r] for r in requests
    ]
    assert all(entry.created for answer in answers for entry in answer)
    assert enqueuer.requests == 41
    assert enqueuer.commits < 41  # the first commits alone, the rest arrive during it and share
    queue = await storage.queues.get_queue("q")
    assert queue is not None
    assert queue.counts["ready"] == 45
    assert len(wakes) == enqueuer.commits  # one wake-up per commit, after it


async def test_a_request_that_stores_nothing_new_wakes_nobody(storage: Storage, clock: VirtualClock) -> None:
    wakes: list[None] = []
    enqueuer = Enqueuer(storage.tasks, clock, lambda: wakes.append(None))
    await enqueuer.enqueue([new(idempotency_key="once")])
    [again] = await enqueuer.enqueue([new(idempotency_key="once")])
    assert not again.created
    assert len(wakes) == 1
