"""PostgreSQL's delivery history (HistoryStore): attempts per series and minute, the
dashboard's charts; the queries are in sql/stats.sql."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from workly.delivery_stats import MinuteStats, Scope
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.statements import Connections, execute, fetch
from workly.storage.stats_rows import in_key_order, minute_from_row, minute_params


def _same(value: datetime) -> datetime:
    return value


@raises_workly_errors(interpret_postgres_error)
class PostgresHistory:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

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
