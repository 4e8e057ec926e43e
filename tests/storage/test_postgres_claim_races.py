"""PostgreSQL interleavings that only several connections can produce, forced with a
transaction that holds a lock while the others queue up behind it.

- A retry that makes a finished task its key's head again, racing claims that read
  the key before and after it: never two tasks of one key in flight.
- Deleting a queue while a result batch holds one of its tasks: no deadlock.
- The count of deliveries in flight, broken by hand, is repaired by recount_running.
- An enqueue whose queue is deleted under it: a conflict to retry, in Workly's words only.
- An eager enqueue (it leases in its own statement) queued behind a claim, with a queue
  delete behind it: no deadlock; a claim meanwhile does not wait for a queue with nothing ready.
- An eager enqueue waiting for another transaction's idempotency key holds no queue row.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
import pytest

from tests.storage.helpers import new, result_for, token
from tests.support.clock import VirtualClock
from tests.support.pg_waits import wait_for_lock_waiters
from workly.breaker import HELD_UNTIL
from workly.errors import StorageConflict
from workly.models import LeaseOffer, QueueConfig
from workly.storage.postgres import PostgresStorage
from workly.storage.queries import postgres_queries

pytestmark = pytest.mark.postgres
MARGIN = 30.0


async def running_of_key(conn: asyncpg.Connection, key: str) -> int:
    count: int = await conn.fetchval("SELECT count(*) FROM tasks WHERE key = $1 AND status = 'running'", key)
    return count


async def test_a_retried_head_and_two_waiting_claims_never_run_a_key_twice(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storages = [await PostgresStorage.open(pg_url) for _ in range(3)]
    claim_x, claim_b, api = storages
    try:
        await api.queues.put_queue(
            "q", QueueConfig(max_concurrency=10, ordering="key", max_attempts=1), clock.now()
        )
        h1, h2 = new(key="k"), new(key="k")
        await api.tasks.enqueue([h1, h2], clock.now())
        [first] = (await api.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
        await api.dispatch.record_results(
            [result_for(first, clock.now(), "failed", 400)], clock.now()
        )  # h2 is the head now

        blocker = pg.transaction()
        await blocker.start()
        await pg.execute(
            "SELECT name FROM queues WHERE name = 'q' FOR NO KEY UPDATE"
        )  # as a claim in progress
        # One at a time, so that they queue up on the queue's row in this order: x, the retry, b.
        x = asyncio.create_task(
            claim_x.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
        )  # reads: head h2
        await wait_for_lock_waiters(pg, 1)
        retry = asyncio.create_task(api.tasks.retry_task(h1.id, clock.now()))  # h1 would be the head again
        await wait_for_lock_waiters(pg, 2)
        b = asyncio.create_task(claim_b.dispatch.claim_tasks(10, clock.now(), token(), MARGIN))
        await wait_for_lock_waiters(pg, 3)
        await blocker.commit()
        async with asyncio.timeout(10):
            got_x, _, got_b = await asyncio.gather(x, retry, b)
        assert len(got_x.tasks) + len(got_b.tasks) == 1
        assert await running_of_key(pg, "k") == 1
    finally:
        for storage in storages:
            await storage.close()


async def test_deleting_a_queue_while_a_result_batch_holds_its_task_does_not_deadlock(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await storage.tasks.enqueue([new()], clock.now())
        [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
        result = result_for(claimed, clock.now(), "succeeded")
        batch = pg.transaction()
        await batch.start()
        await pg.execute("SELECT 1 FROM tasks WHERE seq = $1 FOR UPDATE", claimed.seq)  # the batch's row lock
        delete = asyncio.create_task(storage.queues.delete_queue("q"))  # waits for that row
        await wait_for_lock_waiters(pg, 1)
        record = postgres_queries().record_results
        await pg.fetch(record.sql, *record.args({
            "task_seqs": [result.task_seq], "lease_tokens": [result.lease_token],
            "attempts": [result.attempt], "started_ats": [result.started_at],
            "finished_ats": [result.finished_at], "status_codes": [result.status_code],
            "errors": [result.error], "responses": [result.response], "outcomes": [result.outcome],
            "next_run_ats": [result.next_run_at], "sents": [True], "now": clock.now(), "ok_keys": [],
            "held_until": HELD_UNTIL,
        }))  # fmt: skip
        await batch.commit()
        async with asyncio.timeout(10):
            await delete
        assert await pg.fetchval("SELECT count(*) FROM queue_releases") == 0  # went with the queue
    finally:
        await storage.close()


async def test_recount_repairs_a_counter_that_drifted(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await storage.queues.put_queue("q", QueueConfig(max_concurrency=2), clock.now())
        await storage.tasks.enqueue([new() for _ in range(4)], clock.now())
        running = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
        await storage.dispatch.record_results(
            [result_for(running[0], clock.now(), "succeeded")], clock.now()
        )  # a release waits
        await pg.execute(
            "UPDATE queues SET running = 7 WHERE name = 'q'"
        )  # as an older version might leave it
        assert (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks == []
        assert await storage.upkeep.recount_running() == 1
        assert await storage.upkeep.recount_running() == 0  # nothing left to repair
        assert (
            len(
                (
                    await storage.dispatch.claim_tasks(
                        10, clock.now() + timedelta(seconds=1), token(), MARGIN
                    )
                ).tasks
            )
            == 1
        )
    finally:
        await storage.close()


async def test_a_head_that_ran_and_now_waits_for_its_retry_is_not_claimed_early(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await storage.queues.put_queue("q", QueueConfig(max_concurrency=10, ordering="key"), clock.now())
        head = new(key="k")
        await storage.tasks.enqueue([head, new(key="k")], clock.now())
        blocker = pg.transaction()
        await blocker.start()
        await pg.execute("SELECT name FROM queues WHERE name = 'q' FOR NO KEY UPDATE")
        late = asyncio.create_task(
            storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
        )  # reads: head due
        await wait_for_lock_waiters(pg, 1)
        # Meanwhile another process claims the head, delivers it, and schedules a retry.
        other = await asyncpg.connect(pg_url)
        try:
            await other.execute(
                "UPDATE tasks SET status = 'ready', attempts = 1, run_at = $2 WHERE id = $1",
                head.id,
                clock.now() + timedelta(seconds=60),
            )
        finally:
            await other.close()
        await blocker.commit()
        async with asyncio.timeout(10):
            claimed = await late
        assert claimed.tasks == []
    finally:
        await storage.close()


async def test_an_enqueue_into_a_queue_deleted_under_it_is_a_conflict_in_workly_words(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await storage.queues.put_queue("q", QueueConfig(), clock.now())
        deleting = pg.transaction()
        await deleting.start()
        await pg.execute("SELECT 1 FROM queues WHERE name = 'q' FOR UPDATE")  # as a DELETE about to run
        enqueue = asyncio.create_task(
            storage.tasks.enqueue([new()], clock.now())
        )  # its foreign key check waits
        await wait_for_lock_waiters(pg, 1)
        await pg.execute("DELETE FROM queues WHERE name = 'q'")
        await deleting.commit()
        with pytest.raises(StorageConflict) as refused:
            await asyncio.wait_for(enqueue, 10)
        assert "retry" in str(refused.value)
        assert "tasks_queue_fkey" not in str(refused.value)  # the driver's words stay in the log
        assert "tasks_queue_fkey" in str(refused.value.__cause__)
    finally:
        await storage.close()


async def test_an_eager_enqueue_queued_between_a_claim_and_a_queue_delete_does_not_deadlock(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    # The eager enqueue (one statement) asks for NO KEY UPDATE on its queue's row and then,
    # inserting, for KEY SHARE (its foreign key check); a delete of the queue (which
    # conflicts with both) queued behind it must not close a cycle. A claim meanwhile does
    # not wait for the row at all: the queue holds nothing ready.
    storages = [await PostgresStorage.open(pg_url) for _ in range(3)]
    api, admin, claimer = storages
    try:
        await api.queues.put_queue("q", QueueConfig(max_concurrency=5), clock.now())
        blocker = pg.transaction()
        await blocker.start()
        await pg.execute("SELECT name FROM queues WHERE name = 'q' FOR NO KEY UPDATE")  # a claim
        eager = asyncio.create_task(
            api.tasks.enqueue([new(), new()], clock.now(), LeaseOffer(10, token(), MARGIN, 0.0))
        )
        await wait_for_lock_waiters(pg, 1)
        async with asyncio.timeout(10):
            claimed = await claimer.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
        assert claimed.tasks == []
        delete = asyncio.create_task(admin.queues.delete_queue("q"))
        await wait_for_lock_waiters(pg, 2)
        await blocker.commit()
        async with asyncio.timeout(10):
            entries, _ = await asyncio.gather(eager, delete)
        assert [e.leased is not None for e in entries] == [True, True]
        assert await pg.fetchval("SELECT count(*) FROM tasks") == 0  # deleted with its queue
    finally:
        for storage in storages:
            await storage.close()


async def test_an_eager_enqueue_waiting_for_an_idempotency_key_holds_no_queue_row(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    # An application's open transaction holds a task with key "k" (workly.enqueue_task, say).
    # An eager enqueue of the same key waits for it; meanwhile a claim must still get at the
    # queue's other work, so the enqueue must not be waiting with the queue's row locked.
    storages = [await PostgresStorage.open(pg_url) for _ in range(3)]
    api, other, claimer = storages
    application = await asyncpg.connect(pg_url)
    try:
        await api.queues.put_queue("q", QueueConfig(max_concurrency=5), clock.now())
        held = application.transaction()
        await held.start()
        await application.execute(
            """INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, priority,
                                  idempotency_key, created_at, updated_at)
               VALUES ('task_app', 'q', 'ready', 'http://127.0.0.1:9/', 'POST', '{}', '', $1, 0, 'k',
                       $1, $1)""",
            clock.now(),
        )
        keyed = new(idempotency_key="k")
        eager = asyncio.create_task(
            api.tasks.enqueue([keyed], clock.now(), LeaseOffer(10, token(), MARGIN, 0.0))
        )
        await wait_for_lock_waiters(pg, 1)  # on the application's transaction
        plain = new()
        await other.tasks.enqueue([plain], clock.now())
        async with asyncio.timeout(10):
            claimed = await claimer.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
        assert [task.id for task in claimed.tasks] == [plain.id]
        await held.rollback()  # the key is free again: the waiting enqueue stores its task
        async with asyncio.timeout(10):
            [entry] = await eager
        assert entry.created and entry.task.id == keyed.id
    finally:
        await application.close()
        for storage in storages:
            await storage.close()
