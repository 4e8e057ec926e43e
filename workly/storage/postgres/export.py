"""PostgreSQL's tenant export (ExportStore); the queries are in sql/lifecycle.sql."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workly.lifecycle import ExportedTask
from workly.storage.export_rows import exported
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.statements import DECODERS, Connections, fetch
from workly.storage.queries import Query


@raises_workly_errors(interpret_postgres_error)
class PostgresExport:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def tasks_of_events(
        self, event_ids: Sequence[str], after_seq: int, limit: int
    ) -> list[ExportedTask]:
        query = self._q.export_event_tasks
        return await self._page(query, ids=list(event_ids), after_seq=after_seq, limit=limit)

    async def tenant_tasks(self, tenant: str, after_seq: int, limit: int) -> list[ExportedTask]:
        return await self._page(self._q.export_tenant_tasks, tenant=tenant, after_seq=after_seq, limit=limit)

    async def test_deliveries(self, endpoint_id: str, after_seq: int, limit: int) -> list[ExportedTask]:
        return await self._page(
            self._q.export_test_tasks, queue=endpoint_id, after_seq=after_seq, limit=limit
        )

    async def _page(self, query: Query, **params: Any) -> list[ExportedTask]:
        async with self._pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            tasks = await fetch(conn, query, **params)
            attempts = (
                await fetch(conn, self._q.export_attempts, seqs=[row["seq"] for row in tasks])
                if tasks
                else []
            )
        return exported(tasks, attempts, DECODERS)
