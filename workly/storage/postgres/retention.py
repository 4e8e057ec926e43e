"""PostgreSQL's retention (RetentionStore); the queries are in sql/lifecycle.sql."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from workly.lifecycle import RetentionOverride
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.statements import Connections, fetch
from workly.storage.queries import Query


@raises_workly_errors(interpret_postgres_error)
class PostgresRetention:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def prune_succeeded(self, before: datetime, limit: int = 1000) -> int:
        return await self._deleted(self._q.prune_succeeded, cutoff=before, limit=limit)

    async def prune_failed(self, before: datetime, limit: int = 1000) -> int:
        return await self._deleted(self._q.prune_failed, cutoff=before, limit=limit)

    async def retention_overrides(self) -> list[RetentionOverride]:
        found = await fetch(self._pool, self._q.retention_overrides)
        return [RetentionOverride(row["kind"], row["name"], row["retention"]) for row in found]

    async def prune_queue(self, queue: str, before: datetime, limit: int = 1000) -> int:
        return await self._deleted(self._q.prune_queue, queue=queue, cutoff=before, limit=limit)

    async def prune_tenant(self, tenant: str, before: datetime, limit: int = 1000) -> int:
        pruned = await self._deleted(self._q.prune_tenant_tasks, tenant=tenant, cutoff=before, limit=limit)
        if pruned < limit:
            pruned += await self._deleted(
                self._q.prune_tenant_deliveries, tenant=tenant, cutoff=before, limit=limit - pruned
            )
        return pruned

    async def prune_tenant_events(self, tenant: str, before: datetime, limit: int = 1000) -> int:
        return await self._deleted(self._q.prune_tenant_events, tenant=tenant, cutoff=before, limit=limit)

    async def prune_events(self, before: datetime, limit: int = 1000) -> int:
        return await self._deleted(self._q.prune_events, cutoff=before, limit=limit)

    async def prune_retired_queues(self) -> int:
        return await self._deleted(self._q.prune_retired_queues)

    async def _deleted(self, query: Query, **params: Any) -> int:
        """Run a DELETE … RETURNING; how many rows it deleted."""
        return len(await fetch(self._pool, query, **params))
