"""SQLite's delivery history (HistoryStore): attempts per series and minute, the
dashboard's charts; the queries are in sql/stats.sql. Writes are bookkeeping, as claims and
results are: committed with synchronous=NORMAL (a power loss may lose a few seconds of
chart, never a task)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from workly.delivery_stats import MinuteStats, Scope
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import Connections, execute, execute_many, fetchall, from_us, to_us
from workly.storage.stats_rows import in_key_order, minute_from_row, minute_params

_q = sqlite_queries


@raises_workly_errors(interpret_sqlite_error)
class SqliteHistory:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._bookkeeping = db.bookkeeping

    async def add_delivery_minutes(self, stats: Sequence[MinuteStats]) -> None:
        params = [minute_params(row, to_us(row.minute)) for row in in_key_order(stats)]
        await self._writer.transaction(self._bookkeeping, execute_many, _q().add_delivery_minute, params)

    async def delivery_minutes(self, scope: Scope, name: str | None, since: datetime) -> list[MinuteStats]:
        if name is None:
            params: dict[str, object] = {"scope": scope, "since": to_us(since)}
            found = await self._reader.run(fetchall, _q().delivery_minutes_of_scope, params)
        else:
            params = {"scope": scope, "name": name, "since": to_us(since)}
            found = await self._reader.run(fetchall, _q().delivery_minutes, params)
        return [minute_from_row(row, from_us) for row in found]

    async def prune_delivery_minutes(self, before: datetime) -> None:
        await self._writer.transaction(
            self._bookkeeping, execute, _q().prune_delivery_minutes, {"before": to_us(before)}
        )
