"""SQLite backend: WAL, one writer connection (BEGIN IMMEDIATE), one reader connection.

Single process only: the writer lock is an asyncio.Lock, so every write transaction in
the process runs on one connection, one at a time, as SQLite requires anyway.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from workly.errors import ConfigError, QueueNotFound, TaskNotFound
from workly.models import (
    Attempt,
    AttemptResult,
    ClaimedTask,
    Enqueued,
    NewTask,
    Queue,
    QueueConfig,
    RecordSummary,
    Task,
    TaskStatus,
    check_queue_config,
)
from workly.storage import rows
from workly.storage.migrator import pending
from workly.storage.queries import load_queries
from workly.storage.tasks import check_transition, enqueue_results

SynchronousMode = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
_MAX_SEQ = 2**63 - 1
_MIN_SQLITE = (3, 38, 0)  # ->> operator, RETURNING, UPDATE … FROM


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_us(value: datetime) -> int:
    """Integer arithmetic: a float would lose microseconds far from 1970."""
    return (value - _EPOCH) // _MICROSECOND


def from_us(value: Any) -> datetime:
    return _EPOCH + timedelta(microseconds=int(value))


def _as_headers(value: Any) -> dict[str, str]:
    return dict(json.loads(value))


_DECODERS = rows.Decoders(time=from_us, headers=_as_headers)


def sqlite_path(url: str) -> Path:
    if not url.startswith("sqlite:///"):
        raise ConfigError(f"not a SQLite URL: {url!r} (expected sqlite:///path)")
    path = url.removeprefix("sqlite:///")
    if not path or path == ":memory:":
        raise ConfigError("SQLite needs a file path: sqlite:///./workly.db")
    return Path(path)


class SqliteStorage:
    dialect = "sqlite"

    def __init__(self, writer: aiosqlite.Connection, reader: aiosqlite.Connection) -> None:
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self._q = load_queries("sqlite")

    @classmethod
    async def open(cls, url: str, synchronous: SynchronousMode = "FULL") -> SqliteStorage:
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise ConfigError(f"SQLite {sqlite3.sqlite_version} is too old: Workly needs 3.38 or newer")
        path = sqlite_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = await _connect(path)
        await writer.execute("PRAGMA journal_mode = WAL")
        await writer.execute(f"PRAGMA synchronous = {synchronous}")
        reader = await _connect(path)
        await reader.execute("PRAGMA query_only = ON")
        return cls(writer, reader)

    async def close(self) -> None:
        await self._reader.close()
        await self._writer.close()

    async def ping(self) -> None:
        await self._reader.execute(self._q.ping)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._write_lock:
            await self._writer.execute("BEGIN IMMEDIATE")
            try:
                yield self._writer
            except BaseException:
                await self._writer.rollback()
                raise
            await self._writer.commit()

    async def migrate(self) -> list[int]:
        applied = []
        async with self._transaction() as db:
            await db.execute(self._q.lock_migrations)
            await db.execute(self._q.create_schema_version)
            current = await _fetchval(db, self._q.get_schema_version)
            for migration in pending("sqlite", current):
                for statement in _split_statements(migration.sql):
                    await db.execute(statement)
                await db.execute(self._q.set_schema_version, {"version": migration.version})
                applied.append(migration.version)
        return applied

    async def schema_version(self) -> int:
        async with self._transaction() as db:
            await db.execute(self._q.create_schema_version)
            version: int = await _fetchval(db, self._q.get_schema_version)
            return version

    # --- tasks -------------------------------------------------------------------
    async def enqueue(self, queue: str, tasks: Sequence[NewTask], now: datetime) -> list[Enqueued]:
        now_us = to_us(now)
        async with self._transaction() as db:
            await db.execute(self._q.ensure_queue, {"queue": queue, "now": now_us})
            keys = sorted({t.idempotency_key for t in tasks if t.idempotency_key is not None})
            existing: list[sqlite3.Row] = []
            if keys:
                existing = await _fetchall(
                    db, self._q.get_tasks_by_idempotency_keys, {"queue": queue, "keys": json.dumps(keys)}
                )
            # BEGIN IMMEDIATE excludes other writers, so checking keys first is race free.
            taken = {row["idempotency_key"] for row in existing}
            to_insert = []
            for task in tasks:
                if task.idempotency_key is not None:
                    if task.idempotency_key in taken:
                        continue
                    taken.add(task.idempotency_key)
                to_insert.append(_task_params(queue, task, now_us))
            await db.executemany(self._q.insert_tasks, to_insert)
            created = await _fetchall(
                db, self._q.get_tasks_by_ids, {"ids": json.dumps([p["id"] for p in to_insert])}
            )
        return enqueue_results(
            tasks,
            {row["id"]: rows.task_from_row(row, _DECODERS) for row in created},
            {row["idempotency_key"]: rows.task_from_row(row, _DECODERS) for row in existing},
        )

    async def get_task(self, task_id: str) -> Task | None:
        found = await _fetchall(self._reader, self._q.get_task, {"id": task_id})
        return rows.task_from_row(found[0], _DECODERS) if found else None

    async def list_tasks(
        self, queue: str, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        if not await _fetchall(self._reader, self._q.get_queue, {"name": queue}):
            raise QueueNotFound(queue)
        params = {
            "queue": queue,
            "status": status,
            "before": _MAX_SEQ if before_seq is None else before_seq,
            "limit": limit + 1,
        }
        query = self._q.list_tasks if status is None else self._q.list_tasks_by_status
        found = await _fetchall(self._reader, query, params)
        page = [rows.task_from_row(row, _DECODERS) for row in found[:limit]]
        return page, (found[limit - 1]["seq"] if len(found) > limit else None)

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        if not await _fetchall(self._reader, self._q.get_task, {"id": task_id}):
            raise TaskNotFound(task_id)
        found = await _fetchall(self._reader, self._q.list_attempts, {"id": task_id})
        return [rows.attempt_from_row(row, _DECODERS) for row in found]

    async def cancel_task(self, task_id: str, now: datetime) -> Task:
        return await self._transition(self._q.cancel_task, task_id, now, "cancel")

    async def retry_task(self, task_id: str, now: datetime) -> Task:
        return await self._transition(self._q.retry_task, task_id, now, "retry")

    async def _transition(self, query: str, task_id: str, now: datetime, action: str) -> Task:
        async with self._transaction() as db:
            changed = await _fetchall(db, query, {"id": task_id, "now": to_us(now)})
            found = await _fetchall(db, self._q.get_task, {"id": task_id})
        task = rows.task_from_row(found[0], _DECODERS) if found else None
        return check_transition(task_id, task, bool(changed), action)

    # --- dispatch ----------------------------------------------------------------
    async def claim_tasks(
        self, limit: int, now: datetime, lease_token: str, lease_margin: float
    ) -> list[ClaimedTask]:
        now_us = to_us(now)
        async with self._transaction() as db:
            heads: list[sqlite3.Row] = []
            for queue in await _fetchall(db, self._q.claim_tasks_open_queues):
                candidates = await _fetchall(
                    db,
                    self._q.claim_tasks_candidates,
                    {"queue": queue["name"], "now": now_us, "limit": min(queue["free"], limit)},
                )
                heads.extend(candidates)
            if not heads:
                return []
            chosen = heapq.nsmallest(limit, heads, key=rows.claim_order)
            found = await _fetchall(
                db,
                self._q.claim_tasks,
                {
                    "now": now_us,
                    "lease_token": lease_token,
                    "lease_margin": lease_margin,
                    "seqs": json.dumps([row["seq"] for row in chosen]),
                },
            )
        return [
            rows.claimed_from_row(row, _DECODERS, lease_token) for row in sorted(found, key=rows.claim_order)
        ]

    async def record_results(self, results: Sequence[AttemptResult], now: datetime) -> RecordSummary:
        if not results:
            return RecordSummary(accepted=0, stale=0)
        payload = json.dumps(
            [
                {
                    "task_seq": r.task_seq,
                    "lease_token": r.lease_token,
                    "outcome": r.outcome,
                    "next_run_at": None if r.next_run_at is None else to_us(r.next_run_at),
                    "status_code": r.status_code,
                    "error": r.error,
                }
                for r in results
            ]
        )
        async with self._transaction() as db:
            updated = await _fetchall(db, self._q.record_results, {"results": payload, "now": to_us(now)})
            accepted = {row["seq"] for row in updated}
            await db.executemany(
                self._q.record_results_attempts,
                [
                    {
                        "task_seq": r.task_seq,
                        "attempt": r.attempt,
                        "started_at": to_us(r.started_at),
                        "finished_at": to_us(r.finished_at),
                        "status_code": r.status_code,
                        "error": r.error,
                        "response": r.response,
                        "stale": r.task_seq not in accepted,
                    }
                    for r in results
                ],
            )
        stale = sum(1 for r in results if r.task_seq not in accepted)
        return RecordSummary(accepted=len(results) - stale, stale=stale)

    # --- queues ------------------------------------------------------------------
    async def get_queue(self, name: str) -> Queue | None:
        return await _read_queue(self._reader, self._q.get_queue, self._q.count_tasks_of_queue, name)

    async def list_queues(self) -> list[Queue]:
        found = await _fetchall(self._reader, self._q.list_queues)
        counts = rows.counts_by_queue(await _fetchall(self._reader, self._q.count_tasks))
        return [
            rows.queue_from_row(row, counts.get(row["name"], rows.empty_counts()), _DECODERS) for row in found
        ]

    async def put_queue(self, name: str, config: QueueConfig, now: datetime) -> tuple[Queue, bool]:
        async with self._transaction() as db:
            created = not await _fetchall(db, self._q.get_queue, {"name": name})
            await db.execute(self._q.put_queue, _config_params(name, config, now))
            queue = await _read_queue(db, self._q.get_queue, self._q.count_tasks_of_queue, name)
        assert queue is not None
        return queue, created

    async def update_queue(self, name: str, changes: Mapping[str, Any], now: datetime) -> Queue:
        async with self._transaction() as db:
            found = await _fetchall(db, self._q.get_queue_for_update, {"name": name})
            if not found:
                raise QueueNotFound(name)
            config = check_queue_config(replace(rows.queue_config_from_row(found[0]), **changes))
            await db.execute(self._q.update_queue, _config_params(name, config, now))
            queue = await _read_queue(db, self._q.get_queue, self._q.count_tasks_of_queue, name)
        assert queue is not None
        return queue

    async def delete_queue(self, name: str) -> None:
        async with self._transaction() as db:
            if not await _fetchall(db, self._q.delete_queue, {"name": name}):
                raise QueueNotFound(name)

    async def purge_queue(self, name: str) -> int:
        async with self._transaction() as db:
            if not await _fetchall(db, self._q.get_queue, {"name": name}):
                raise QueueNotFound(name)
            cursor = await db.execute(self._q.purge_queue, {"queue": name})
            return cursor.rowcount


async def _connect(path: Path) -> aiosqlite.Connection:
    db = await aiosqlite.connect(path, isolation_level=None)
    db.row_factory = sqlite3.Row
    await db.execute("PRAGMA foreign_keys = ON")
    await db.execute("PRAGMA busy_timeout = 5000")
    return db


async def _fetchall(
    db: aiosqlite.Connection, query: str, params: Mapping[str, Any] | None = None
) -> list[sqlite3.Row]:
    return list(await db.execute_fetchall(query, params or {}))


async def _fetchone(
    db: aiosqlite.Connection, query: str, params: Mapping[str, Any] | None = None
) -> sqlite3.Row | None:
    found = await _fetchall(db, query, params)
    return found[0] if found else None


async def _fetchval(db: aiosqlite.Connection, query: str, params: Mapping[str, Any] | None = None) -> Any:
    row = await _fetchone(db, query, params)
    assert row is not None
    return row[0]


async def _read_queue(db: aiosqlite.Connection, get_query: str, count_query: str, name: str) -> Queue | None:
    found = await _fetchall(db, get_query, {"name": name})
    if not found:
        return None
    counts = rows.counts_by_queue(await _fetchall(db, count_query, {"queue": name}))
    return rows.queue_from_row(found[0], counts.get(name, rows.empty_counts()), _DECODERS)


def _task_params(queue: str, task: NewTask, now_us: int) -> dict[str, Any]:
    return {
        "id": task.id,
        "queue": queue,
        "url": task.url,
        "method": task.method,
        "headers": json.dumps(task.headers),
        "body": task.body,
        "run_at": None if task.run_at is None else to_us(task.run_at),
        "priority": task.priority,
        "key": task.key,
        "tenant": task.tenant,
        "idempotency_key": task.idempotency_key,
        "max_attempts": task.max_attempts,
        "timeout": task.timeout,
        "now": now_us,
    }


def _config_params(name: str, config: QueueConfig, now: datetime) -> dict[str, Any]:
    return {**asdict(config), "name": name, "now": to_us(now)}


def _split_statements(script: str) -> list[str]:
    """Split a migration into statements (sqlite3 runs one per execute)."""
    statements, current = [], []
    for line in script.splitlines():
        current.append(line)
        candidate = "\n".join(current).strip()
        if candidate.endswith(";") and sqlite3.complete_statement(candidate):
            statements.append(candidate)
            current = []
    tail = "\n".join(current).strip()
    if tail and not all(line.strip().startswith("--") or not line.strip() for line in current):
        statements.append(tail)
    return statements
