"""PostgreSQL's part of the cheap counts and the charts; the queries are in
sql/postgres_stats.sql. A mixin of PostgresStorage (its pool and queries)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from workly.delivery_stats import MinuteStats, Scope
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres_statements import execute, fetch
from workly.storage.queries import PostgresQueries
from workly.storage.stats_rows import in_key_order, minute_from_row, minute_params

WHOLE_TABLE_TIMEOUT = 3600.0  # seconds: counting every task may rightly take minutes


def _same(value: datetime) -> datetime:
    return value


@raises_workly_errors(interpret_postgres_error)
class PostgresStats:
    _pool: asyncpg.Pool
    _q: PostgresQueries

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

    async def add_delivery_minutes(self, stats: Sequence[MinuteStats]) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            for row in in_key_order(stats):
                await execute(conn, self._q.add_delivery_minute, **minute_params(row, row.minute))

    async def delivery_minutes(self, scope: Scope, name: str | None, since: datetime) -> list[MinuteStats]:
        if name is None:
            found = await fetch(self._pool, self._q.delivery_minutes_of_scope, scope=scope, since=since)
        else:
            found = await fetch(self._pool, self._q.delivery_minutes, scope=scope, name=name, since=since)
        return [minute_from_row(row, _same) for row in found]

    async def prune_delivery_minutes(self, before: datetime) -> None:
        await execute(self._pool, self._q.prune_delivery_minutes, before=before)
