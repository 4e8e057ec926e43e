"""PostgreSQL's queues (QueueStore); their task counts come from the kept counts table."""

from __future__ import annotations

from datetime import datetime

from workly.errors import QueueNotFound
from workly.models import Queue, QueueChange, QueueConfig
from workly.storage import rows
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.statements import (
    DECODERS,
    Connection,
    Connections,
    execute,
    fetch,
    fetchrow,
    fetchval,
)


@raises_workly_errors(interpret_postgres_error)
class PostgresQueues:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def get_queue(self, name: str) -> Queue | None:
        async with self._pool.acquire() as conn:
            return await self._read_queue(conn, name)

    async def _read_queue(self, conn: Connection, name: str) -> Queue | None:
        row = await fetchrow(conn, self._q.get_queue, name=name)
        if row is None:
            return None
        counts = rows.counts_by_queue(await fetch(conn, self._q.count_tasks_of_queue, queue=name))
        return rows.queue_from_row(row, counts.get(name, rows.empty_counts()), DECODERS)

    async def list_queues(self) -> list[Queue]:
        async with self._pool.acquire() as conn:
            found = await fetch(conn, self._q.list_queues)
            counts = rows.counts_by_queue(await fetch(conn, self._q.count_tasks))
        return [
            rows.queue_from_row(row, counts.get(row["name"], rows.empty_counts()), DECODERS) for row in found
        ]

    async def put_queue(self, name: str, config: QueueConfig, now: datetime) -> tuple[Queue, bool]:
        async with self._pool.acquire() as conn:
            created = await fetchval(conn, self._q.put_queue, **rows.config_params(name, config, now))
            queue = await self._read_queue(conn, name)
        if queue is None:  # deleted by another process right after this put
            raise QueueNotFound(name)
        return queue, bool(created)

    async def update_queue(self, name: str, change: QueueChange, now: datetime) -> Queue:
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                row = await fetchrow(conn, self._q.get_queue_for_update, name=name)
                if row is None:
                    raise QueueNotFound(name)
                config = change(rows.queue_config_from_row(row))
                await execute(conn, self._q.update_queue, **rows.config_params(name, config, now))
            queue = await self._read_queue(conn, name)
        if queue is None:
            raise QueueNotFound(name)
        return queue

    async def delete_queue(self, name: str) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            if await fetchval(conn, self._q.delete_queue, name=name) is None:
                raise QueueNotFound(name)
            await execute(conn, self._q.delete_queue_releases, queue=name)
            await execute(conn, self._q.delete_queue_minutes, queue=name)

    async def purge_queue(self, name: str) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            if await fetchrow(conn, self._q.get_queue_for_update, name=name) is None:
                raise QueueNotFound(name)
            purged: int = await fetchval(conn, self._q.purge_queue, queue=name)
        return purged
