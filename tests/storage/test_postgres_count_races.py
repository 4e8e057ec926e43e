"""PostgreSQL's kept task counts (migration 0014) under interleavings only several
connections produce: each statement appends its change, folds merge the rows, and neither
an uncommitted change nor a second fold is lost or counted twice.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import asyncpg
import pytest

from tests.storage.helpers import new, result_for, token
from tests.support.clock import VirtualClock
from tests.support.pg_waits import wait_for_lock_waiters
from workly.delivery_stats import MinuteStats, minute_of
from workly.storage.migrator import load_migrations, pending
from workly.storage.postgres import PostgresStorage
from workly.storage.postgres import database as postgres_database
from workly.storage.queries import postgres_queries
from workly.storage.stats_rows import minute_params

pytestmark = pytest.mark.postgres
MARGIN = 30.0


async def kept(conn: asyncpg.Connection) -> dict[tuple[str, str], int]:
    found = await conn.fetch(
        "SELECT queue, status, sum(n) AS n FROM task_counts GROUP BY 1, 2 HAVING sum(n) <> 0"
    )
    return {(row["queue"], row["status"]): row["n"] for row in found}


async def truth(conn: asyncpg.Connection) -> dict[tuple[str, str], int]:
    found = await conn.fetch("SELECT queue, status, count(*) AS n FROM tasks GROUP BY 1, 2")
    return {(row["queue"], row["status"]): row["n"] for row in found}


async def test_a_fold_leaves_an_uncommitted_change_to_count_when_it_commits(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await storage.tasks.enqueue([new() for _ in range(4)], clock.now())
        change = pg.transaction()
        await change.start()
        await pg.execute("UPDATE tasks SET status = 'canceled' WHERE seq = (SELECT min(seq) FROM tasks)")
        async with asyncio.timeout(10):
            await storage.upkeep.fold_task_counts()  # does not wait for the open transaction
        assert await kept(pg) == {("q", "ready"): 3, ("q", "canceled"): 1}  # the change, as its own sees it
        await change.commit()
        await storage.upkeep.fold_task_counts()
        assert await kept(pg) == await truth(pg) == {("q", "ready"): 3, ("q", "canceled"): 1}
        assert await pg.fetchval("SELECT count(*) FROM task_counts") == 2  # folded: one row each
    finally:
        await storage.close()


async def test_two_folds_at_once_count_every_row_once(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        for _ in range(3):
            await storage.tasks.enqueue([new(), new()], clock.now())  # three appended rows
        fold = postgres_queries().fold_task_counts
        first = pg.transaction()
        await first.start()
        await pg.execute(fold.sql)  # deleted the rows, inserted their sum: not committed
        second = asyncio.create_task(storage.upkeep.fold_task_counts())  # waits for the deleted rows
        await wait_for_lock_waiters(pg, 1)
        await first.commit()
        async with asyncio.timeout(10):
            await second
        assert await kept(pg) == {("q", "ready"): 6}
        assert await pg.fetchval("SELECT count(*) FROM task_counts") == 1
    finally:
        await storage.close()


async def test_concurrent_writers_and_folds_end_with_the_true_counts(
    pg_url: str, clock: VirtualClock
) -> None:
    storages = [await PostgresStorage.open(pg_url) for _ in range(4)]

    async def work(storage: PostgresStorage, rounds: int) -> None:
        for _ in range(rounds):
            await storage.tasks.enqueue([new(queue=queue) for queue in ("a", "b", "a")], clock.now())
            claim = await storage.dispatch.claim_tasks(2, clock.now(), token(), MARGIN)
            outcomes = ["succeeded", "failed"]
            await storage.dispatch.record_results(
                [result_for(task, clock.now(), outcomes[i % 2], 200 if i % 2 == 0 else 400)  # type: ignore[arg-type]
                 for i, task in enumerate(claim.tasks)],
                clock.now(),
            )  # fmt: skip

    async def fold(storage: PostgresStorage, rounds: int) -> None:
        for _ in range(rounds):
            await storage.upkeep.fold_task_counts()
            await asyncio.sleep(0)

    try:
        async with asyncio.timeout(60):
            await asyncio.gather(
                work(storages[0], 40), work(storages[1], 40), fold(storages[2], 80), fold(storages[3], 80)
            )
        conn = await asyncpg.connect(pg_url)
        try:
            assert await kept(conn) == await truth(conn)
            assert sum((await truth(conn)).values()) == 2 * 40 * 3
        finally:
            await conn.close()
    finally:
        for storage in storages:
            await storage.close()


async def test_a_truncate_during_a_fold_leaves_no_counts(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        for _ in range(5):
            await storage.tasks.enqueue([new()], clock.now())
        fold = pg.transaction()
        await fold.start()
        await pg.execute(postgres_queries().fold_task_counts.sql)  # its sum inserted, not committed
        operator = await asyncpg.connect(pg_url)
        truncate = asyncio.create_task(operator.execute("TRUNCATE tasks CASCADE"))
        await wait_for_lock_waiters(pg, 1)
        await fold.commit()
        async with asyncio.timeout(10):
            await truncate
        await operator.close()
        assert await kept(pg) == await truth(pg) == {}
    finally:
        await storage.close()


async def test_the_fold_leaves_folded_counts_alone(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await storage.tasks.enqueue([new(), new(queue="b")], clock.now())
        await storage.tasks.enqueue([new()], clock.now())
        await storage.upkeep.fold_task_counts()
        rows = await pg.fetch("SELECT ctid, queue, status, n FROM task_counts ORDER BY queue")
        assert [(row["queue"], row["n"]) for row in rows] == [("b", 1), ("q", 2)]
        await storage.upkeep.fold_task_counts()  # nothing changed: no row rewritten (no WAL, no dead rows)
        assert await pg.fetch("SELECT ctid, queue, status, n FROM task_counts ORDER BY queue") == rows
    finally:
        await storage.close()


async def test_flushes_of_the_same_minutes_wait_for_each_other_without_a_deadlock(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    first, second = (MinuteStats("queue", name, minute_of(clock.now()), succeeded=1) for name in ("a", "b"))
    upsert = postgres_queries().add_delivery_minute
    try:
        other = pg.transaction()  # another process's flush, in key order: "a" first
        await other.start()
        await pg.execute(upsert.sql, *upsert.args(minute_params(first, first.minute)))
        flush = asyncio.create_task(storage.history.add_delivery_minutes([second, first]))  # counted b first
        await wait_for_lock_waiters(pg, 1)  # waits for "a" before it takes "b"
        await pg.execute(upsert.sql, *upsert.args(minute_params(second, second.minute)))
        await other.commit()
        async with asyncio.timeout(10):
            await flush
        stored = await storage.history.delivery_minutes("queue", None, first.minute)
        assert [(row.name, row.succeeded) for row in stored] == [("a", 2), ("b", 2)]
    finally:
        await storage.close()


async def test_migration_0014_counts_the_writes_it_waited_for_whatever_the_default_isolation(
    pg_fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = await asyncpg.connect(pg_fresh_db)
    database = urlsplit(pg_fresh_db).path.lstrip("/")
    isolation = "SET default_transaction_isolation = 'repeatable read'"  # this test's database only
    await admin.execute(f'ALTER DATABASE "{database}" {isolation}')
    await admin.close()
    storage = await PostgresStorage.open(pg_fresh_db)
    writer = await asyncpg.connect(pg_fresh_db)
    try:
        with monkeypatch.context() as patch:  # the schema of before 0014
            patch.setattr(
                postgres_database, "pending", lambda dialect, current: pending(dialect, current)[:13]
            )
            assert await storage.database.migrate() == list(range(1, 14))
        enqueue = "SELECT enqueue_task(queue => 'q', url => 'http://127.0.0.1:9/')"
        await writer.execute(enqueue)
        writing = writer.transaction()
        await writing.start()
        await writer.execute(enqueue)  # in flight when the migration starts
        migrating = asyncio.create_task(storage.database.migrate())
        await wait_for_lock_waiters(writer, 1)  # 0014 waits for the writer to commit
        await writing.commit()
        async with asyncio.timeout(30):
            assert await migrating == list(range(14, len(load_migrations("postgres")) + 1))
        assert await kept(writer) == await truth(writer) == {("q", "ready"): 2}
    finally:
        await writer.close()
        await storage.close()
