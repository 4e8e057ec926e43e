"""PostgreSQL's tasks as the API and the enqueuer see them (TaskStore)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from workly.breaker import HELD_UNTIL
from workly.errors import QueueNotFound, TaskNotFound
from workly.models import Attempt, ClaimedTask, Enqueued, LeaseOffer, NewTask, Task, TaskStatus
from workly.storage import rows
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.enqueue import enqueue_on
from workly.storage.postgres.statements import (
    DECODERS,
    Connections,
    execute,
    fetch,
    fetchrow,
    retrying_contention,
)
from workly.storage.queries import Query
from workly.storage.tasks import check_deleted, check_transition


@raises_workly_errors(interpret_postgres_error)
class PostgresTasks:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def enqueue(
        self, tasks: Sequence[NewTask], now: datetime, offer: LeaseOffer | None = None
    ) -> list[Enqueued]:
        async def attempt() -> list[Enqueued]:
            async with self._pool.acquire() as conn:
                return await enqueue_on(conn, self._q, tasks, now, offer)

        # Its insert locks the queue rows a claim locks too (eager dispatch): a deadlock
        # rolls it back whole, and a second try finds what an earlier one committed.
        return await retrying_contention(attempt)

    async def leased_tasks(self, ids: Sequence[str], lease_token: str) -> list[ClaimedTask]:
        found = await fetch(self._pool, self._q.get_leased_tasks, ids=list(ids), lease_token=lease_token)
        return [rows.claimed_from_row(row, DECODERS, lease_token) for row in found]

    async def get_task(self, task_id: str) -> Task | None:
        row = await fetchrow(self._pool, self._q.get_task, id=task_id)
        return None if row is None else rows.task_from_row(row, DECODERS)

    async def list_tasks(
        self, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        q = self._q
        page = rows.page_params(limit, before_seq)
        async with self._pool.acquire() as conn:
            if queue is None:
                if status is None:
                    found = await fetch(conn, q.list_all_tasks, **page)
                else:
                    found = await fetch(conn, q.list_all_tasks_by_status, status=status, **page)
            elif await fetchrow(conn, q.get_queue, name=queue) is None:
                raise QueueNotFound(queue)
            elif status is None:
                found = await fetch(conn, q.list_tasks, queue=queue, **page)
            else:
                found = await fetch(conn, q.list_tasks_by_status, queue=queue, status=status, **page)
        shown, next_seq = rows.page(found, limit)
        return [rows.task_from_row(row, DECODERS) for row in shown], next_seq

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        async with self._pool.acquire() as conn:
            if await fetchrow(conn, self._q.get_task, id=task_id) is None:
                raise TaskNotFound(task_id)
            found = await fetch(conn, self._q.list_attempts, id=task_id)
        return [rows.attempt_from_row(row, DECODERS) for row in found]

    async def delete_task(self, task_id: str) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            if await fetchrow(conn, self._q.delete_task, id=task_id) is None:
                row = await fetchrow(conn, self._q.get_task, id=task_id)
                check_deleted(task_id, None if row is None else rows.task_from_row(row, DECODERS))

    async def cancel_task(self, task_id: str, now: datetime) -> Task:
        return await self._transition(self._q.cancel_task, task_id, now, "cancel")

    async def retry_task(self, task_id: str, now: datetime) -> Task:
        return await self._transition(
            self._q.retry_task, task_id, now, "retry", lock_queue=True, held_until=HELD_UNTIL
        )

    async def _transition(
        self, query: Query, task_id: str, now: datetime, action: str, lock_queue: bool = False, **more: Any
    ) -> Task:
        async with self._pool.acquire() as conn, conn.transaction():
            if lock_queue:
                await execute(conn, self._q.lock_queue_of_task, id=task_id)
            changed = await fetchrow(conn, query, id=task_id, now=now, **more)
            row = await fetchrow(conn, self._q.get_task, id=task_id)
        task = None if row is None else rows.task_from_row(row, DECODERS)
        return check_transition(task_id, task, changed is not None, action)
