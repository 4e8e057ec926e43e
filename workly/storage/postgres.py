"""PostgreSQL backend: an asyncpg pool; claims with FOR UPDATE SKIP LOCKED."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import astuple, replace
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from workly.errors import ConfigError, QueueNotFound, TaskNotFound
from workly.models import (
    Attempt,
    AttemptResult,
    Claim,
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
from workly.storage.postgres_wakeups import PostgresWakeups
from workly.storage.queries import load_queries
from workly.storage.tasks import check_transition, enqueue_results, idempotency_keys

_MAX_SEQ = 2**63 - 1
MIGRATION_TIMEOUT = 3600.0  # seconds; see migrate()


def _placed(row: asyncpg.Record) -> tuple[int, int, datetime, int]:
    return (row["place"], -row["priority"], row["run_at"], row["seq"])


def _as_datetime(value: Any) -> datetime:
    assert isinstance(value, datetime)
    return value


def _as_headers(value: Any) -> dict[str, str]:
    return dict(json.loads(value) if isinstance(value, str) else value)


_DECODERS = rows.Decoders(time=_as_datetime, headers=_as_headers)


def split_pool_size(url: str) -> tuple[str, int]:
    """Remove ``pool_max_conns`` from the URL (asyncpg rejects it) and return the size.

    Default: the CPU count, at least 4.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    size = max(4, os.cpu_count() or 1)
    kept = []
    for name, value in query:
        if name == "pool_max_conns":
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(f"pool_max_conns must be a positive integer, got {value!r}")
            size = int(value)
        else:
            kept.append((name, value))
    return urlunsplit(parts._replace(query=urlencode(kept))), size


async def _keep_session(conn: asyncpg.Connection) -> None:
    """No reset query when a connection returns to the pool.

    asyncpg's default (UNLISTEN *, RESET ALL, …) is a round trip per release, for session
    state Workly never sets on pooled connections: LISTEN has a connection of its own and
    advisory locks are transaction-scoped. An open transaction is still rolled back.
    """


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


class PostgresStorage:
    dialect = "postgres"

    def __init__(self, pool: asyncpg.Pool, dsn: str) -> None:
        self._pool = pool
        self._dsn = dsn
        self._q = load_queries("postgres")
        self.wakeups = PostgresWakeups(pool, dsn, self._q)

    @classmethod
    async def open(cls, url: str, command_timeout: float = 10.0) -> PostgresStorage:
        dsn, size = split_pool_size(url)
        pool = await asyncpg.create_pool(
            dsn,
            min_size=1,
            max_size=size,
            init=_init_connection,
            reset=_keep_session,
            command_timeout=command_timeout,
            # JIT compiles plans for analytics; for short queue statements it only adds latency.
            server_settings={"jit": "off", "application_name": "workly"},
        )
        return cls(pool, dsn)

    async def close(self) -> None:
        await self.wakeups.close()
        await self._pool.close()

    async def needs_vacuum(self) -> bool:
        enabled: bool = await self._pool.fetchval(self._q.autovacuum_enabled)
        return not enabled

    async def vacuum(self) -> None:
        await self._pool.execute(self._q.vacuum)

    async def announce_work(self) -> None:
        await self.wakeups.announce_work()

    async def listen_for_work(self, on_work: Callable[[], None]) -> None:
        self.wakeups.listen(on_work)

    async def ping(self) -> None:
        await self._pool.fetchval(self._q.ping, timeout=2)

    async def migrate(self) -> list[int]:
        applied = []
        async with self._pool.acquire() as conn, conn.transaction():
            # Not bounded by the statement timeout: waiting for another process's migration,
            # or building an index over a large table, may rightly take minutes.
            await conn.execute(self._q.lock_migrations, timeout=MIGRATION_TIMEOUT)
            await conn.execute(self._q.create_schema_version)
            current = await conn.fetchval(self._q.get_schema_version)
            for migration in pending("postgres", current):
                await conn.execute(migration.sql, timeout=MIGRATION_TIMEOUT)
                await conn.execute(self._q.set_schema_version, migration.version)
                applied.append(migration.version)
        return applied

    async def schema_version(self) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(self._q.create_schema_version)
            version: int = await conn.fetchval(self._q.get_schema_version)
            return version

    # --- tasks -------------------------------------------------------------------
    async def enqueue(self, tasks: Sequence[NewTask], now: datetime) -> list[Enqueued]:
        async with self._pool.acquire() as conn:
            created = await conn.fetch(
                self._q.enqueue_tasks,
                now,
                [t.id for t in tasks],
                [t.queue for t in tasks],
                [t.url for t in tasks],
                [t.method for t in tasks],
                [json.dumps(t.headers) for t in tasks],
                [t.body for t in tasks],
                [t.run_at for t in tasks],
                [t.priority for t in tasks],
                [t.key for t in tasks],
                [t.tenant for t in tasks],
                [t.idempotency_key for t in tasks],
                [t.max_attempts for t in tasks],
                [t.timeout for t in tasks],
            )
            # Tasks of a queue another transaction created meanwhile: read as stored.
            for index, row in enumerate(created):
                if row["max_attempts"] is None:
                    reread = await conn.fetchrow(self._q.get_task, row["id"])
                    assert reread is not None, "inserted in this statement"
                    created[index] = reread
            existing = []
            if len(created) < len(tasks):
                # Stored by an earlier try of this same request (committed, not answered).
                inserted = {row["id"] for row in created}
                skipped = [t.id for t in tasks if t.id not in inserted]
                created.extend(await conn.fetch(self._q.get_tasks_by_ids, skipped))
                keys = idempotency_keys(tasks)
                existing = await conn.fetch(
                    self._q.get_tasks_by_idempotency_keys, [q for q, _ in keys], [k for _, k in keys]
                )
        return enqueue_results(
            tasks,
            {row["id"]: rows.task_from_row(row, _DECODERS) for row in created},
            {(row["queue"], row["idempotency_key"]): rows.task_from_row(row, _DECODERS) for row in existing},
        )

    async def get_task(self, task_id: str) -> Task | None:
        row = await self._pool.fetchrow(self._q.get_task, task_id)
        return None if row is None else rows.task_from_row(row, _DECODERS)

    async def list_tasks(
        self, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        before = _MAX_SEQ if before_seq is None else before_seq
        async with self._pool.acquire() as conn:
            if queue is None:
                if status is None:
                    found = await conn.fetch(self._q.list_all_tasks, before, limit + 1)
                else:
                    found = await conn.fetch(self._q.list_all_tasks_by_status, status, before, limit + 1)
            elif await conn.fetchrow(self._q.get_queue, queue) is None:
                raise QueueNotFound(queue)
            elif status is None:
                found = await conn.fetch(self._q.list_tasks, queue, before, limit + 1)
            else:
                found = await conn.fetch(self._q.list_tasks_by_status, queue, status, before, limit + 1)
        page = [rows.task_from_row(row, _DECODERS) for row in found[:limit]]
        return page, (found[limit - 1]["seq"] if len(found) > limit else None)

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        async with self._pool.acquire() as conn:
            if await conn.fetchrow(self._q.get_task, task_id) is None:
                raise TaskNotFound(task_id)
            found = await conn.fetch(self._q.list_attempts, task_id)
        return [rows.attempt_from_row(row, _DECODERS) for row in found]

    async def cancel_task(self, task_id: str, now: datetime) -> Task:
        return await self._transition(self._q.cancel_task, task_id, now, "cancel")

    async def retry_task(self, task_id: str, now: datetime) -> Task:
        return await self._transition(self._q.retry_task, task_id, now, "retry", lock_queue=True)

    async def _transition(
        self, query: str, task_id: str, now: datetime, action: str, lock_queue: bool = False
    ) -> Task:
        async with self._pool.acquire() as conn, conn.transaction():
            if lock_queue:
                await conn.execute(self._q.lock_queue_of_task, task_id)
            changed = await conn.fetchrow(query, task_id, now)
            row = await conn.fetchrow(self._q.get_task, task_id)
        task = None if row is None else rows.task_from_row(row, _DECODERS)
        return check_transition(task_id, task, changed is not None, action)

    # --- dispatch ----------------------------------------------------------------
    async def claim_tasks(self, limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        found = await self._pool.fetch(self._q.claim_tasks, now, limit, lease_token, lease_margin)
        *tasks, hint = found  # the last row carries no task: when to claim again
        return Claim(
            tasks=[rows.claimed_from_row(row, _DECODERS, lease_token) for row in sorted(tasks, key=_placed)],
            rate_wait=hint["wait"],
            more=hint["more"],
        )

    async def record_results(self, results: Sequence[AttemptResult], now: datetime) -> RecordSummary:
        if not results:
            return RecordSummary(accepted=0, stale=0)
        stale_flags = await self._pool.fetch(
            self._q.record_results,
            [r.task_seq for r in results],
            [r.lease_token for r in results],
            [r.attempt for r in results],
            [r.started_at for r in results],
            [r.finished_at for r in results],
            [r.status_code for r in results],
            [r.error for r in results],
            [r.response for r in results],
            [r.outcome for r in results],
            [r.next_run_at for r in results],
            now,
        )
        # Attempts of deleted tasks are not kept, so count what was accepted.
        accepted = sum(1 for row in stale_flags if not row["stale"])
        return RecordSummary(accepted=accepted, stale=len(results) - accepted)

    async def extend_leases(
        self, leases: Sequence[tuple[int, str]], now: datetime, lease_margin: float
    ) -> int:
        if not leases:
            return 0
        seqs, tokens = [seq for seq, _ in leases], [token for _, token in leases]
        return len(await self._pool.fetch(self._q.extend_leases, now, lease_margin, seqs, tokens))

    async def prune_succeeded(self, before: datetime, limit: int = 1000) -> int:
        return len(await self._pool.fetch(self._q.prune_succeeded, before, limit))

    async def reap_expired(self, now: datetime, limit: int = 1000) -> int:
        return len(await self._pool.fetch(self._q.reap_expired, now, limit))

    # --- queues ------------------------------------------------------------------
    async def get_queue(self, name: str) -> Queue | None:
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(self._q.get_queue, name)
            if row is None:
                return None
            counts = rows.counts_by_queue(await conn.fetch(self._q.count_tasks_of_queue, name))
        return rows.queue_from_row(row, counts.get(name, rows.empty_counts()), _DECODERS)

    async def list_queues(self) -> list[Queue]:
        async with self._pool.acquire() as conn:
            found = await conn.fetch(self._q.list_queues)
            counts = rows.counts_by_queue(await conn.fetch(self._q.count_tasks))
        return [
            rows.queue_from_row(row, counts.get(row["name"], rows.empty_counts()), _DECODERS) for row in found
        ]

    async def delivered_since(self, since: datetime) -> dict[str, int]:
        async with self._pool.acquire() as conn:
            return {row["queue"]: row["n"] for row in await conn.fetch(self._q.delivered_since, since)}

    async def put_queue(self, name: str, config: QueueConfig, now: datetime) -> tuple[Queue, bool]:
        created = await self._pool.fetchval(self._q.put_queue, name, *_config_values(config), now)
        queue = await self.get_queue(name)
        assert queue is not None
        return queue, bool(created)

    async def update_queue(self, name: str, changes: Mapping[str, Any], now: datetime) -> Queue:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(self._q.get_queue_for_update, name)
            if row is None:
                raise QueueNotFound(name)
            config = check_queue_config(replace(rows.queue_config_from_row(row), **changes))
            await conn.execute(self._q.update_queue, name, *_config_values(config), now)
        queue = await self.get_queue(name)
        if queue is None:
            raise QueueNotFound(name)
        return queue

    async def delete_queue(self, name: str) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            if await conn.fetchval(self._q.delete_queue, name) is None:
                raise QueueNotFound(name)
            await conn.execute(self._q.delete_queue_releases, name)

    async def recount_running(self) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(self._q.lock_queues)
            return len(await conn.fetch(self._q.recount_running))

    async def purge_queue(self, name: str) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            if await conn.fetchrow(self._q.get_queue_for_update, name) is None:
                raise QueueNotFound(name)
            purged: int = await conn.fetchval(self._q.purge_queue, name)
        return purged


def _config_values(config: QueueConfig) -> tuple[Any, ...]:
    """The config in field order: the order of put_queue's and update_queue's parameters."""
    return astuple(config)
