"""SQLite's queues (QueueStore); their task counts come from the kept counts table."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from workly.errors import QueueNotFound
from workly.models import Queue, QueueChange, QueueConfig
from workly.storage import rows
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import DECODERS, Connections, execute, fetchall, fetchone, to_us

Db = sqlite3.Connection
_q = sqlite_queries


@raises_workly_errors(interpret_sqlite_error)
class SqliteQueues:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def get_queue(self, name: str) -> Queue | None:
        return await self._reader.run(_read_queue, name)

    async def list_queues(self) -> list[Queue]:
        return await self._reader.run(_list_queues)

    async def put_queue(self, name: str, config: QueueConfig, now: datetime) -> tuple[Queue, bool]:
        return await self._writer.transaction(self._acknowledged, _put_queue, name, config, to_us(now))

    async def update_queue(self, name: str, change: QueueChange, now: datetime) -> Queue:
        return await self._writer.transaction(self._acknowledged, _update_queue, name, change, to_us(now))

    async def delete_queue(self, name: str) -> None:
        await self._writer.transaction(self._acknowledged, _delete_queue, name)

    async def purge_queue(self, name: str) -> int:
        return await self._writer.transaction(self._acknowledged, _purge_queue, name)


def _read_queue(db: Db, name: str) -> Queue | None:
    row = fetchone(db, _q().get_queue, {"name": name})
    if row is None:
        return None
    counts = rows.counts_by_queue(fetchall(db, _q().count_tasks_of_queue, {"queue": name}))
    return rows.queue_from_row(row, counts.get(name, rows.empty_counts()), DECODERS)


def _list_queues(db: Db) -> list[Queue]:
    counts = rows.counts_by_queue(fetchall(db, _q().count_tasks))
    return [
        rows.queue_from_row(row, counts.get(row["name"], rows.empty_counts()), DECODERS)
        for row in fetchall(db, _q().list_queues)
    ]


def _put_queue(db: Db, name: str, config: QueueConfig, now_us: int) -> tuple[Queue, bool]:
    created = fetchone(db, _q().get_queue, {"name": name}) is None
    execute(db, _q().put_queue, rows.config_params(name, config, now_us))
    queue = _read_queue(db, name)
    assert queue is not None
    return queue, created


def _update_queue(db: Db, name: str, change: QueueChange, now_us: int) -> Queue:
    row = fetchone(db, _q().get_queue_for_update, {"name": name})
    if row is None:
        raise QueueNotFound(name)
    config = change(rows.queue_config_from_row(row))
    execute(db, _q().update_queue, rows.config_params(name, config, now_us))
    queue = _read_queue(db, name)
    assert queue is not None
    return queue


def _delete_queue(db: Db, name: str) -> None:
    if not fetchall(db, _q().delete_queue, {"name": name}):
        raise QueueNotFound(name)
    execute(db, _q().delete_queue_minutes, {"queue": name})


def _purge_queue(db: Db, name: str) -> int:
    if fetchone(db, _q().get_queue, {"name": name}) is None:
        raise QueueNotFound(name)
    return execute(db, _q().purge_queue, {"queue": name}).rowcount
