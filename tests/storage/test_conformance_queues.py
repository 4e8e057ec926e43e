"""The storage contract, queue side and concurrency: every test runs on both backends."""

from __future__ import annotations

import asyncio

import pytest

from tests.storage.helpers import another_process, changing, in_queue, new, result_for, token
from tests.support.clock import VirtualClock
from workly.errors import InvalidQueueConfig, QueueNotFound
from workly.models import QueueConfig
from workly.storage.contract import Storage

MARGIN = 30.0


async def test_first_enqueue_creates_the_queue_with_defaults(storage: Storage, clock: VirtualClock) -> None:
    assert await storage.queues.get_queue("fresh") is None
    await storage.tasks.enqueue(in_queue("fresh", [new(), new()]), clock.now())
    queue = await storage.queues.get_queue("fresh")
    assert queue is not None
    assert queue.config == QueueConfig()
    assert queue.counts == {"ready": 2, "running": 0, "succeeded": 0, "failed": 0, "canceled": 0}


async def test_put_creates_then_replaces(storage: Storage, clock: VirtualClock) -> None:
    config = QueueConfig(max_concurrency=7, rate_limit=2.5, max_attempts=3, timeout=5, ordering="key")
    queue, created = await storage.queues.put_queue("q", config, clock.now())
    assert created and queue.config == config
    queue, created = await storage.queues.put_queue("q", QueueConfig(paused=True), clock.advance(1))
    assert not created
    assert queue.config == QueueConfig(paused=True)
    assert queue.updated_at == clock.now() and queue.created_at < clock.now()


async def test_update_changes_only_the_given_fields(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(rate_limit=10, max_attempts=4), clock.now())
    queue = await storage.queues.update_queue("q", changing(max_concurrency=9, rate_limit=None), clock.now())
    assert queue.config == QueueConfig(max_concurrency=9, rate_limit=None, max_attempts=4)

    def refused(config: QueueConfig) -> QueueConfig:
        raise InvalidQueueConfig("as the service's check would")

    with pytest.raises(InvalidQueueConfig):
        await storage.queues.update_queue("q", refused, clock.now())
    unchanged = await storage.queues.get_queue("q")
    assert unchanged is not None and unchanged.config.min_backoff == 1.0
    with pytest.raises(QueueNotFound):
        await storage.queues.update_queue("missing", changing(paused=True), clock.now())


async def test_list_queues_with_counts(storage: Storage, clock: VirtualClock) -> None:
    await storage.tasks.enqueue(in_queue("b", [new()]), clock.now())
    await storage.tasks.enqueue(in_queue("a", [new(), new()]), clock.now())
    await storage.queues.put_queue("c", QueueConfig(), clock.now())
    await storage.dispatch.claim_tasks(1, clock.now(), token(), MARGIN)
    queues = await storage.queues.list_queues()
    assert [q.name for q in queues] == ["a", "b", "c"]
    assert sum(q.counts["running"] for q in queues) == 1
    assert sum(q.counts["ready"] for q in queues) == 2
    assert queues[2].counts == dict.fromkeys(queues[2].counts, 0)


async def test_paused_queue_is_not_claimed(storage: Storage, clock: VirtualClock) -> None:
    await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    await storage.queues.update_queue("q", changing(paused=True), clock.now())
    assert (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks == []
    await storage.queues.update_queue("q", changing(paused=False), clock.now())
    assert len((await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks) == 1


async def test_a_full_queue_does_not_block_another(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("busy", QueueConfig(max_concurrency=1), clock.now())
    await storage.tasks.enqueue(in_queue("busy", [new() for _ in range(5)]), clock.now())
    quiet = new()
    await storage.tasks.enqueue(in_queue("quiet", [quiet]), clock.now())
    claimed = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert sorted(c.queue for c in claimed) == ["busy", "quiet"]


async def test_purge_drops_only_ready_tasks(storage: Storage, clock: VirtualClock) -> None:
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(4)]), clock.now())
    [running] = (await storage.dispatch.claim_tasks(1, clock.now(), token(), MARGIN)).tasks
    assert await storage.queues.purge_queue("q") == 3
    queue = await storage.queues.get_queue("q")
    assert queue is not None
    assert (queue.counts["ready"], queue.counts["running"]) == (0, 1)
    assert await storage.tasks.get_task(running.id) is not None
    with pytest.raises(QueueNotFound):
        await storage.queues.purge_queue("missing")


async def test_delete_removes_the_queue_its_tasks_and_attempts(storage: Storage, clock: VirtualClock) -> None:
    task = new()
    await storage.tasks.enqueue(in_queue("q", [task]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(1, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results([result_for(claimed, clock.now(), "succeeded")], clock.now())
    await storage.queues.delete_queue("q")
    assert await storage.queues.get_queue("q") is None
    assert await storage.tasks.get_task(task.id) is None
    with pytest.raises(QueueNotFound):
        await storage.queues.delete_queue("q")


async def test_list_tasks_newest_first_in_pages(storage: Storage, clock: VirtualClock) -> None:
    tasks = [new() for _ in range(7)]
    for task in tasks:
        await storage.tasks.enqueue(in_queue("q", [task]), clock.now())
    await storage.tasks.cancel_task(tasks[2].id, clock.now())
    seen, cursor = [], None
    while True:
        page, cursor = await storage.tasks.list_tasks("q", None, 3, cursor)
        seen.extend(t.id for t in page)
        if cursor is None:
            break
    assert seen == [t.id for t in reversed(tasks)]
    canceled, cursor = await storage.tasks.list_tasks("q", "canceled", 3, None)
    assert ([t.id for t in canceled], cursor) == ([tasks[2].id], None)
    with pytest.raises(QueueNotFound):
        await storage.tasks.list_tasks("missing", None, 3, None)


async def test_list_tasks_of_every_queue_newest_first_in_pages(storage: Storage, clock: VirtualClock) -> None:
    # Interleaved over three queues, so a merge that pages per queue would show out of order.
    tasks = [(queue, new()) for _ in range(4) for queue in ("a", "b", "c")]
    for queue, task in tasks:
        await storage.tasks.enqueue(in_queue(queue, [task]), clock.now())
    for _, task in tasks[::4]:  # one of each queue
        await storage.tasks.cancel_task(task.id, clock.now())
    newest_first = [task.id for _, task in reversed(tasks)]
    for status, expected in ((None, newest_first), ("canceled", [t.id for _, t in reversed(tasks[::4])])):
        seen, cursor = [], None
        while True:
            page, cursor = await storage.tasks.list_tasks(None, status, 5, cursor)
            seen.extend(t.id for t in page)
            assert len(page) <= 5
            if cursor is None:
                break
        assert seen == expected, status
    ready, _ = await storage.tasks.list_tasks(None, "ready", 100, None)
    assert {t.queue for t in ready} == {"a", "b", "c"} and all(t.status == "ready" for t in ready)
    assert await storage.tasks.list_tasks(None, "failed", 5, None) == ([], None)


async def test_concurrent_claimers_never_share_a_task(
    storage: Storage, database_url: str, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=10_000), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(400)]), clock.now())
    other = await another_process(storage, database_url)
    try:
        claimers = [storage, other] * 4

        async def drain(claimer: Storage) -> list[str]:
            ids: list[str] = []
            while batch := (await claimer.dispatch.claim_tasks(7, clock.now(), token(), MARGIN)).tasks:
                ids.extend(c.id for c in batch)
            return ids

        claimed = await asyncio.gather(*(drain(c) for c in claimers))
    finally:
        await other.close()
    every = [task_id for ids in claimed for task_id in ids]
    assert len(every) == 400
    assert len(set(every)) == 400


async def test_concurrent_duplicate_enqueues_store_one_task(
    storage: Storage, database_url: str, clock: VirtualClock
) -> None:
    other = await another_process(storage, database_url)
    try:
        enqueuers = [storage, other] * 10
        entries = await asyncio.gather(
            *(e.tasks.enqueue(in_queue("q", [new(idempotency_key="same")]), clock.now()) for e in enqueuers)
        )
    finally:
        await other.close()
    flat = [entry for batch in entries for entry in batch]
    assert sum(entry.created for entry in flat) == 1
    assert len({entry.task.id for entry in flat}) == 1
    queue = await storage.queues.get_queue("q")
    assert queue is not None and queue.counts["ready"] == 1


async def test_a_queue_signing_secret_is_stored_and_handed_to_claims(
    storage: Storage, clock: VirtualClock
) -> None:
    secret = "whsec_cXVldWUtc2VjcmV0LTAxMjM0NTY3ODk="
    queue, _ = await storage.queues.put_queue("q", QueueConfig(signing_secret=secret), clock.now())
    assert queue.config.signing_secret == secret
    await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert claimed.signing_secret == secret
    cleared = await storage.queues.update_queue("q", changing(signing_secret=None), clock.now())
    assert cleared.config.signing_secret is None
