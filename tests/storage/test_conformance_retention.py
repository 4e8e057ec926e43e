"""The storage contract, retention: old succeeded tasks go with their attempts; nothing else does."""

from __future__ import annotations

from datetime import timedelta

from tests.storage.helpers import new, result_for, token
from tests.support.clock import VirtualClock
from workly.models import QueueConfig
from workly.storage.contract import Storage

MARGIN = 30.0


async def test_only_succeeded_tasks_older_than_the_cutoff_are_pruned(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100, max_attempts=1), clock.now())
    old = [new() for _ in range(5)]
    await storage.tasks.enqueue(old, clock.now())
    claimed = (await storage.dispatch.claim_tasks(100, clock.now(), token(), MARGIN)).tasks
    outcomes = ["succeeded", "succeeded", "succeeded", "failed", "succeeded"]
    await storage.dispatch.record_results(
        [
            result_for(c, clock.now(), o, 200 if o == "succeeded" else 500)
            for c, o in zip(claimed, outcomes, strict=True)
        ],
        clock.now(),
    )
    canceled = new()
    await storage.tasks.enqueue([canceled], clock.now())
    await storage.tasks.cancel_task(canceled.id, clock.now())
    recent = new()
    await storage.tasks.enqueue([recent], clock.advance(3600))
    [claimed_recent] = (await storage.dispatch.claim_tasks(100, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results([result_for(claimed_recent, clock.now(), "succeeded")], clock.now())

    cutoff = clock.now() - timedelta(seconds=60)
    assert [await storage.upkeep.prune_succeeded(cutoff, limit=3) for _ in range(3)] == [3, 1, 0]
    assert await storage.tasks.get_task(old[0].id) is None
    failed = await storage.tasks.get_task(old[3].id)
    assert failed is not None
    assert failed.status == "failed"  # failed tasks stay until redriven or deleted
    assert await storage.tasks.get_task(canceled.id) is not None
    assert await storage.tasks.get_task(recent.id) is not None  # younger than the cutoff
    queue = await storage.queues.get_queue("q")
    assert queue is not None
    assert (queue.counts["succeeded"], queue.counts["failed"], queue.counts["canceled"]) == (1, 1, 1)
