"""SQLite's tasks as the API and the enqueuer see them (TaskStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from workly.errors import QueueNotFound, TaskNotFound
from workly.json_text import to_json
from workly.models import Attempt, ClaimedTask, Enqueued, LeaseOffer, NewTask, Task, TaskStatus
from workly.storage import rows
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import Query, sqlite_queries
from workly.storage.sqlite.enqueue import enqueue_on
from workly.storage.sqlite.statements import DECODERS, HELD_US, Connections, fetchall, fetchone, to_us
from workly.storage.tasks import check_deleted, check_transition

Db = sqlite3.Connection
_q = sqlite_queries


@raises_workly_errors(interpret_sqlite_error)
class SqliteTasks:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def enqueue(
        self, tasks: Sequence[NewTask], now: datetime, offer: LeaseOffer | None = None
    ) -> list[Enqueued]:
        return await self._writer.transaction(self._acknowledged, enqueue_on, tasks, to_us(now), offer)

    async def leased_tasks(self, ids: Sequence[str], lease_token: str) -> list[ClaimedTask]:
        params = {"ids": to_json(list(ids)), "lease_token": lease_token}
        found = await self._reader.run(fetchall, _q().get_leased_tasks, params)
        return [rows.claimed_from_row(row, DECODERS, lease_token) for row in found]

    async def get_task(self, task_id: str) -> Task | None:
        return await self._reader.run(_get_task, task_id)

    async def list_tasks(
        self, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        return await self._reader.run(_list_tasks, queue, status, limit, before_seq)

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        return await self._reader.run(_list_attempts, task_id)

    async def delete_task(self, task_id: str) -> None:
        await self._writer.transaction(self._acknowledged, _delete_task, task_id)

    async def cancel_task(self, task_id: str, now: datetime) -> Task:
        return await self._writer.transaction(
            self._acknowledged, _transition, _q().cancel_task, task_id, to_us(now), "cancel"
        )

    async def retry_task(self, task_id: str, now: datetime) -> Task:
        return await self._writer.transaction(
            self._acknowledged, _transition, _q().retry_task, task_id, to_us(now), "retry", HELD_US
        )


# --- what runs on the connection threads ------------------------------------------
# Each function takes the connection first; writes run inside BEGIN IMMEDIATE.


def _get_task(db: Db, task_id: str) -> Task | None:
    row = fetchone(db, _q().get_task, {"id": task_id})
    return None if row is None else rows.task_from_row(row, DECODERS)


def _list_tasks(
    db: Db, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
) -> tuple[list[Task], int | None]:
    q = _q()
    page = rows.page_params(limit, before_seq)
    if queue is None and status is None:
        found = fetchall(db, q.list_all_tasks, page)
    elif queue is None:
        # Each queue's newest matches from tasks_queue_status, merged: as PostgreSQL's
        # lateral join does, so a rare status is found without scanning the table.
        seqs: list[int] = []
        for queue_row in fetchall(db, q.list_all_tasks_by_status_queues):
            matches = {**page, "queue": queue_row["name"], "status": status}
            seqs += [row["seq"] for row in fetchall(db, q.list_all_tasks_by_status_seqs, matches)]
        newest = sorted(seqs, reverse=True)[: limit + 1]
        found = fetchall(db, q.list_all_tasks_by_status_rows, {"seqs": to_json(newest)})
    elif fetchone(db, q.get_queue, {"name": queue}) is None:
        raise QueueNotFound(queue)
    elif status is None:
        found = fetchall(db, q.list_tasks, {**page, "queue": queue})
    else:
        found = fetchall(db, q.list_tasks_by_status, {**page, "queue": queue, "status": status})
    shown, next_seq = rows.page(found, limit)
    return [rows.task_from_row(row, DECODERS) for row in shown], next_seq


def _list_attempts(db: Db, task_id: str) -> list[Attempt]:
    if fetchone(db, _q().get_task, {"id": task_id}) is None:
        raise TaskNotFound(task_id)
    return [rows.attempt_from_row(row, DECODERS) for row in fetchall(db, _q().list_attempts, {"id": task_id})]


def _delete_task(db: Db, task_id: str) -> None:
    task = _get_task(db, task_id)
    if task is None or task.status == "running":
        check_deleted(task_id, task)
    fetchall(db, _q().delete_task_callbacks, {"id": task_id})
    fetchall(db, _q().delete_task, {"id": task_id})


def _transition(
    db: Db, query: Query, task_id: str, now_us: int, action: str, held_until: int | None = None
) -> Task:
    params: dict[str, Any] = {"id": task_id, "now": now_us}
    if held_until is not None:
        params["held_until"] = held_until
    changed = fetchall(db, query, params)
    return check_transition(task_id, _get_task(db, task_id), bool(changed), action)
