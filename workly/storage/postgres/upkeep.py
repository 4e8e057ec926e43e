"""PostgreSQL's periodic upkeep (UpkeepStore): the reaper, retention, breaker probes, the
running counters and the kept task counts, vacuum and index rebuilds."""

from __future__ import annotations

from datetime import datetime

from workly.breaker import HELD_UNTIL
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.indexes import BLOAT_FACTOR, BLOAT_SLACK_BYTES, IndexRebuilder
from workly.storage.postgres.statements import Connections, execute, fetch, fetchrow

WHOLE_TABLE_TIMEOUT = 3600.0  # seconds: counting every task may rightly take minutes


@raises_workly_errors(interpret_postgres_error)
class PostgresUpkeep:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q
        self._indexes = IndexRebuilder(db)

    async def reap_expired(self, now: datetime, limit: int = 1000) -> int:
        return len(await fetch(self._pool, self._q.reap_expired, now=now, limit=limit, held_until=HELD_UNTIL))

    async def recount_running(self) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            await execute(conn, self._q.lock_queues)
            return len(await fetch(conn, self._q.recount_running))

    async def release_probes(self, now: datetime) -> int:
        released = len(await fetch(self._pool, self._q.free_stranded))
        async with self._pool.acquire() as conn, conn.transaction():
            for row in await fetch(conn, self._q.due_probes, now=now):
                if await fetchrow(conn, self._q.release_probe, key=row["key"], now=now) is not None:
                    released += 1
        return released

    async def fold_task_counts(self) -> None:
        await execute(self._pool, self._q.fold_task_counts)

    async def miscounted_queues(self) -> list[str]:
        found = await fetch(self._pool, self._q.miscounted_queues, max_seconds=WHOLE_TABLE_TIMEOUT)
        return [row["queue"] for row in found]

    async def recount_tasks(self) -> None:
        # READ COMMITTED: each statement after the lock sees what committed before it.
        async with self._pool.acquire() as conn, conn.transaction(isolation="read_committed"):
            await execute(conn, self._q.recount_lock_timeout)
            await execute(conn, self._q.lock_for_recount)
            await execute(conn, self._q.clear_task_counts)
            await execute(conn, self._q.count_tasks_into_counts, max_seconds=WHOLE_TABLE_TIMEOUT)

    async def vacuum(self) -> None:
        await execute(self._pool, self._q.vacuum)

    async def rebuild_bloated_indexes(
        self, factor: float = BLOAT_FACTOR, slack_bytes: int = BLOAT_SLACK_BYTES
    ) -> list[str]:
        """``factor`` and ``slack_bytes``: how far past its entries' size an index must have
        grown to be rebuilt (workly/storage/postgres/indexes.py); tests lower them."""
        return await self._indexes.rebuild_bloated(factor, slack_bytes)
