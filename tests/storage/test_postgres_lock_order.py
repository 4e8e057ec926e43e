"""The order PostgreSQL writers take task rows in, so that they cannot deadlock, and what
happens when PostgreSQL breaks a deadlock anyway.

The soak (tools/soak) found them: under 500 tasks/s on three processes, the heartbeat and
the results of the same deliveries locked the same rows in opposite orders, and a
deadlock cost a claim a poll interval, a heartbeat a turn, and a result batch its record
(the tasks went out again after their leases). Now the heartbeat takes its rows in seq
order and skips a locked one (never waits), the results take theirs in seq order before
writing any, and a transaction PostgreSQL aborted to break a deadlock runs again.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.storage.helpers import new, result_for, token
from tests.support.clock import VirtualClock
from tests.support.pg_waits import wait_for_lock_waiters
from workly.errors import StorageContention
from workly.models import ClaimedTask, QueueConfig
from workly.storage.interpret import interpret_postgres_error
from workly.storage.postgres import PostgresStorage
from workly.storage.postgres.statements import retrying_contention

pytestmark = pytest.mark.postgres
MARGIN = 30.0


async def running(storage: PostgresStorage, clock: VirtualClock, count: int) -> list[ClaimedTask]:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=count), clock.now())
    await storage.tasks.enqueue([new() for _ in range(count)], clock.now())
    claimed = (await storage.dispatch.claim_tasks(count, clock.now(), token(), MARGIN)).tasks
    assert len(claimed) == count
    return sorted(claimed, key=lambda task: task.seq)


async def lease_of(pg: asyncpg.Connection, seq: int) -> object:
    return await pg.fetchval("SELECT lease_expires_at FROM tasks WHERE seq = $1", seq)


async def test_the_heartbeat_never_waits_for_a_task_row_another_transaction_holds(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        low, high = await running(storage, clock, 2)
        before = await lease_of(pg, low.seq)
        async with pg.transaction():
            await pg.execute("SELECT 1 FROM tasks WHERE seq = $1 FOR NO KEY UPDATE", low.seq)
            extended = await asyncio.wait_for(
                storage.dispatch.extend_leases(
                    [(low.seq, low.lease_token), (high.seq, high.lease_token)], clock.advance(5), MARGIN
                ),
                timeout=5,  # the old statement waited here for the row, until this transaction ended
            )
        assert extended == {(high.seq, high.lease_token)}  # the free one
        assert await lease_of(pg, low.seq) == before  # the held one, skipped, as it was
    finally:
        await storage.close()


async def test_one_lease_waits_for_its_row_where_the_heartbeat_skips_it(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    """The check before a result is tried again (or a lapsed lease is sent) must not read a
    row a heartbeat holds as a lost lease: it waits, then answers from the row as committed."""
    storage = await PostgresStorage.open(pg_url)
    try:
        held, finished = await running(storage, clock, 2)
        async with pg.transaction():  # a heartbeat in progress
            await pg.execute("SELECT 1 FROM tasks WHERE seq = $1 FOR NO KEY UPDATE", held.seq)
            asked = asyncio.create_task(
                storage.dispatch.extend_lease(held.seq, held.lease_token, clock.advance(5), MARGIN)
            )
            await wait_for_lock_waiters(pg, 1)
            assert not asked.done()
        assert await asked
        async with pg.transaction():  # its result, being written
            await pg.execute("SELECT 1 FROM tasks WHERE seq = $1 FOR NO KEY UPDATE", finished.seq)
            asked = asyncio.create_task(
                storage.dispatch.extend_lease(finished.seq, finished.lease_token, clock.now(), MARGIN)
            )
            await wait_for_lock_waiters(pg, 1)
            await pg.execute(
                "UPDATE tasks SET status = 'succeeded', lease_token = NULL WHERE seq = $1", finished.seq
            )
        assert not await asked  # behind the committed result: no longer held
    finally:
        await storage.close()


async def test_a_result_batch_locks_its_tasks_in_seq_order_before_writing_any(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    probe = await asyncpg.connect(pg_url)
    try:
        tasks = await running(storage, clock, 50)
        low, high = tasks[0], tasks[-1]
        async with pg.transaction():
            await pg.execute("SELECT 1 FROM tasks WHERE seq = $1 FOR NO KEY UPDATE", high.seq)
            # The batch names the highest task first: it still locks the lowest one first,
            # and every other, then waits here for the highest.
            results = [result_for(task, clock.now(), "succeeded") for task in reversed(tasks)]
            recording = asyncio.create_task(storage.dispatch.record_results(results, clock.now()))
            await wait_for_lock_waiters(pg, 1)
            with pytest.raises(asyncpg.exceptions.LockNotAvailableError):
                await probe.execute("SELECT 1 FROM tasks WHERE seq = $1 FOR UPDATE NOWAIT", low.seq)
        summary = await asyncio.wait_for(recording, timeout=5)
        assert summary.accepted == 50
    finally:
        await probe.close()
        await storage.close()


def deadlock() -> asyncpg.exceptions.DeadlockDetectedError:
    return asyncpg.exceptions.DeadlockDetectedError("deadlock detected")


async def test_a_transaction_aborted_to_break_a_deadlock_runs_again() -> None:
    calls: list[int] = []

    async def transaction() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise deadlock()
        return "done"

    assert await retrying_contention(transaction) == "done"
    assert len(calls) == 3


async def test_a_deadlock_every_time_reaches_the_caller_as_contention() -> None:
    calls: list[int] = []

    async def transaction() -> str:
        calls.append(1)
        raise deadlock()

    with pytest.raises(asyncpg.exceptions.DeadlockDetectedError) as raised:
        await retrying_contention(transaction, tries=3)
    assert len(calls) == 3
    error = interpret_postgres_error(raised.value)
    assert isinstance(error, StorageContention)  # a kind of StorageUnavailable: 503, retried


async def test_other_errors_are_not_run_again() -> None:
    calls: list[int] = []

    async def transaction() -> str:
        calls.append(1)
        raise asyncpg.exceptions.UniqueViolationError("duplicate key")

    with pytest.raises(asyncpg.exceptions.UniqueViolationError):
        await retrying_contention(transaction)
    assert len(calls) == 1
