"""Small builders for the storage tests."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from workly.ids import new_task_id
from workly.models import AttemptResult, ClaimedTask, NewTask, Outcome, QueueChange, QueueConfig
from workly.storage.contract import Storage
from workly.storage.postgres import PostgresStorage
from workly.storage.sqlite import SqliteStorage

URL = "http://127.0.0.1:9/hook"  # never contacted: storage tests make no HTTP calls


def new(**fields: Any) -> NewTask:
    return replace(NewTask(id=new_task_id(), queue="q", url=URL), **fields)


def changing(**fields: Any) -> QueueChange:
    """The change that sets these config fields (what the service hands update_queue)."""

    def change(config: QueueConfig) -> QueueConfig:
        return replace(config, **fields)

    return change


def in_queue(queue: str, tasks: list[NewTask]) -> list[NewTask]:
    """The same tasks (same ids), bound for ``queue``."""
    return [replace(task, queue=queue) for task in tasks]


def token() -> str:
    return uuid.uuid4().hex


def result_for(
    task: ClaimedTask,
    now: datetime,
    outcome: Outcome,
    status_code: int | None = 200,
    retry_in: float | None = None,
    lease_token: str | None = None,
) -> AttemptResult:
    return AttemptResult(
        task_seq=task.seq,
        lease_token=lease_token or task.lease_token,
        attempt=task.attempt,
        started_at=now,
        finished_at=now + timedelta(milliseconds=7),
        status_code=status_code,
        error=None if status_code and 200 <= status_code < 300 else f"HTTP {status_code}",
        response=b"response body",
        outcome=outcome,
        next_run_at=None if retry_in is None else now + timedelta(seconds=retry_in),
    )


async def another_process(storage: Storage, database_url: str) -> Storage:
    """Another handle on the same database: its own pool, as another process has."""
    if isinstance(storage, PostgresStorage):
        return await PostgresStorage.open(database_url)
    return await SqliteStorage.open(database_url)
