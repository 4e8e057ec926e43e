"""Rebuilding the indexes retention leaves bloated (workly/storage/postgres/indexes.py).

A sliding window of tasks with a few that stay (failed ones) leaves the indexes on
increasing keys with nearly empty pages VACUUM cannot give back. The rebuild finds them by
their size against what their entries need, rebuilds them concurrently, one process at a
time, and drops what an interrupted rebuild left behind.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from tests.storage.helpers import new, result_for, token
from tests.support.clock import VirtualClock
from workly.models import QueueConfig
from workly.storage.postgres import PostgresStorage
from workly.storage.postgres.indexes import REINDEX_APPLICATION, REINDEX_LOCK

pytestmark = pytest.mark.postgres
MARGIN = 30.0
STAYS_EVERY = 40  # one task in 40 fails and stays: about one resident per index page


async def size(pg: asyncpg.Connection, index: str) -> int:
    found: int = await pg.fetchval("SELECT pg_relation_size($1::regclass)", index)
    return found


async def churn(storage: PostgresStorage, clock: VirtualClock, tasks: int) -> None:
    """``tasks`` tasks through their lives; every STAYS_EVERY-th fails, the rest are pruned."""
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1000, max_attempts=1), clock.now())
    for _ in range(tasks // 500):
        # Every task with an idempotency key, as many senders give: a partial index as large
        # as the table's, with long-lived rows like the full ones.
        await storage.tasks.enqueue([new(idempotency_key=uuid.uuid4().hex) for _ in range(500)], clock.now())
        claimed = (await storage.dispatch.claim_tasks(500, clock.now(), token(), MARGIN)).tasks
        results = [
            result_for(task, clock.now(), "failed" if task.seq % STAYS_EVERY == 0 else "succeeded", 500)
            for task in claimed
        ]
        await storage.dispatch.record_results(results, clock.now())
    while await storage.retention.prune_succeeded(clock.advance(60), limit=5000):
        pass


async def test_bloated_indexes_are_rebuilt_to_what_their_entries_need(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await churn(storage, clock, 10_000)
        await pg.execute("VACUUM ANALYZE tasks")
        bloated = await size(pg, "tasks_id_key")
        bloated_keys = await size(pg, "tasks_idempotency")
        rebuilt = await storage.upkeep.rebuild_bloated_indexes(factor=2, slack_bytes=0)
        assert {"tasks_id_key", "tasks_idempotency"} <= set(rebuilt)
        # Not those whose rows live for one state: their size is traffic, not entries.
        assert not {"tasks_claim", "tasks_lease", "tasks_running", "tasks_succeeded"} & set(rebuilt)
        after = await size(pg, "tasks_id_key")
        assert after * 4 < bloated  # 250 rows left of 10,000: most pages were near empty
        assert await size(pg, "tasks_idempotency") * 4 < bloated_keys
        assert await pg.fetchval("SELECT count(*) FROM tasks") == 10_000 // STAYS_EVERY
        # Rebuilt, they are no longer bloated; a second look finds nothing.
        assert await storage.upkeep.rebuild_bloated_indexes(factor=2, slack_bytes=0) == []
        # And the rebuilt indexes still serve: a lookup by id, the primary key's foreign key.
        assert await storage.tasks.get_task(await pg.fetchval("SELECT id FROM tasks LIMIT 1")) is not None
        assert await pg.fetchval(
            "SELECT bool_and(indisvalid) FROM pg_index WHERE indrelid = 'tasks'::regclass"
        )
    finally:
        await storage.close()


async def test_one_process_at_a_time(pg_url: str, pg: asyncpg.Connection, clock: VirtualClock) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await churn(storage, clock, 2_000)
        await pg.execute("VACUUM ANALYZE tasks")
        await pg.execute("SELECT pg_advisory_lock($1)", REINDEX_LOCK)  # another process at it
        assert await storage.upkeep.rebuild_bloated_indexes(factor=0, slack_bytes=0) == []
        await pg.execute("SELECT pg_advisory_unlock($1)", REINDEX_LOCK)
        assert await storage.upkeep.rebuild_bloated_indexes(factor=0, slack_bytes=0)  # factor 0: all of them
    finally:
        await storage.close()


async def test_what_an_interrupted_rebuild_left_behind_is_dropped(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await storage.tasks.enqueue([new(), new()], clock.now())  # two tasks of one queue
        # A concurrent build that fails leaves its index behind, invalid, as an interrupted
        # REINDEX CONCURRENTLY leaves <index>_ccnew.
        with pytest.raises(asyncpg.exceptions.UniqueViolationError):
            await pg.execute("CREATE UNIQUE INDEX CONCURRENTLY tasks_queue_ccnew ON tasks (queue)")
        assert await pg.fetchval("SELECT to_regclass('tasks_queue_ccnew') IS NOT NULL")
        await storage.upkeep.rebuild_bloated_indexes()
        assert await pg.fetchval("SELECT to_regclass('tasks_queue_ccnew') IS NULL")
    finally:
        await storage.close()


async def test_a_role_that_may_not_rebuild_is_told_once_and_not_asked_again(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    owner = await PostgresStorage.open(pg_url)
    await owner.close()  # the tables exist, owned by the test's superuser
    role = f"workly_no_owner_{os.getpid()}"
    await pg.execute(f"DROP ROLE IF EXISTS {role}")
    await pg.execute(f"CREATE ROLE {role} LOGIN")
    database = await pg.fetchval("SELECT current_database()")
    try:
        await pg.execute(f'GRANT ALL ON DATABASE "{database}" TO {role}')
        await pg.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
        parts = urlsplit(pg_url)
        url = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}"))
        storage = await PostgresStorage.open(url)
        try:
            assert await storage.upkeep.rebuild_bloated_indexes(factor=0, slack_bytes=0) == []
            assert await storage.upkeep.rebuild_bloated_indexes(factor=0, slack_bytes=0) == []
        finally:
            await storage.close()
    finally:
        await pg.execute(f'REVOKE ALL ON DATABASE "{database}" FROM {role}')
        await pg.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
        await pg.execute(f"DROP ROLE {role}")
    refusals = [r for r in caplog.records if "cannot rebuild bloated indexes" in r.getMessage()]
    assert len(refusals) == 1


async def rebuilding(url: str) -> bool:
    conn = await asyncpg.connect(url)
    try:
        found: bool = await conn.fetchval(
            "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'"
            " AND datname = current_database()",
            REINDEX_APPLICATION,
        )
        return found
    finally:
        await conn.close()


async def test_a_migration_cancels_a_rebuild_in_progress(pg_fresh_db: str) -> None:
    # A rebuild holds a lock on its table that the migration's DDL would wait behind, with
    # all traffic queued behind the DDL: migrate stops it first (here a stand-in that sleeps
    # under the rebuild's connection name).
    rebuild = await asyncpg.connect(pg_fresh_db, server_settings={"application_name": REINDEX_APPLICATION})
    try:
        sleeping = asyncio.create_task(rebuild.execute("SELECT pg_sleep(60)"))
        async with asyncio.timeout(10):  # until the server runs it
            while not await rebuilding(pg_fresh_db):
                await asyncio.sleep(0.01)
        storage = await PostgresStorage.open(pg_fresh_db)
        try:
            assert await storage.database.migrate()  # a fresh database: every migration pending
        finally:
            await storage.close()
        with pytest.raises(asyncpg.exceptions.QueryCanceledError):
            await asyncio.wait_for(sleeping, timeout=10)
    finally:
        await rebuild.close()
