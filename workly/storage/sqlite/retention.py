"""SQLite's retention (RetentionStore); the queries are in sql/lifecycle.sql. Deletes are
bookkeeping writes (synchronous=NORMAL at most): a crash may bring back what was pruned."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from workly.lifecycle import RetentionOverride
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import Query, sqlite_queries
from workly.storage.sqlite.statements import Connections, fetchall, to_us

_q = sqlite_queries


@raises_workly_errors(interpret_sqlite_error)
class SqliteRetention:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._bookkeeping = db.bookkeeping

    async def _delete(self, query: Query, **params: Any) -> int:
        return len(await self._writer.transaction(self._bookkeeping, fetchall, query, params))

    async def prune_succeeded(self, before: datetime, limit: int = 1000) -> int:
        return await self._delete(_q().prune_succeeded, cutoff=to_us(before), limit=limit)

    async def prune_failed(self, before: datetime, limit: int = 1000) -> int:
        return await self._delete(_q().prune_failed, cutoff=to_us(before), limit=limit)

    async def retention_overrides(self) -> list[RetentionOverride]:
        found = await self._reader.run(fetchall, _q().retention_overrides, {})
        return [RetentionOverride(row["kind"], row["name"], row["retention"]) for row in found]

    async def prune_queue(self, queue: str, before: datetime, limit: int = 1000) -> int:
        return await self._delete(_q().prune_queue, queue=queue, cutoff=to_us(before), limit=limit)

    async def prune_tenant(self, tenant: str, before: datetime, limit: int = 1000) -> int:
        pruned = await self._delete(_q().prune_tenant_tasks, tenant=tenant, cutoff=to_us(before), limit=limit)
        if pruned < limit:
            pruned += await self._delete(
                _q().prune_tenant_deliveries, tenant=tenant, cutoff=to_us(before), limit=limit - pruned
            )
        return pruned

    async def prune_tenant_events(self, tenant: str, before: datetime, limit: int = 1000) -> int:
        return await self._delete(_q().prune_tenant_events, tenant=tenant, cutoff=to_us(before), limit=limit)

    async def prune_events(self, before: datetime, limit: int = 1000) -> int:
        return await self._delete(_q().prune_events, cutoff=to_us(before), limit=limit)

    async def prune_retired_queues(self) -> int:
        return await self._delete(_q().prune_retired_queues)
