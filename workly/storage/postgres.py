"""PostgreSQL backend: an asyncpg pool; claims with FOR UPDATE SKIP LOCKED.

Every query is a named block of sql/postgres.sql, bound by parameter name (queries.py);
every public method raises only Workly's errors (interpret.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from workly.breaker import HELD_UNTIL, BreakerRules
from workly.database_url import DEFAULT_SCHEMA, check_schema_name, split_pool_size
from workly.errors import ConfigError, QueueNotFound, StorageError, TaskNotFound
from workly.json_text import from_json, to_json
from workly.models import (
    Attempt,
    AttemptResult,
    Claim,
    Queue,
    QueueChange,
    QueueConfig,
    RecordSummary,
    Task,
    TaskStatus,
)
from workly.storage import breakers, rows
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.migrator import pending
from workly.storage.postgres_enqueue import PostgresEnqueue
from workly.storage.postgres_indexes import REINDEX_APPLICATION, PostgresIndexes
from workly.storage.postgres_operations import PostgresOperations
from workly.storage.postgres_schedules import PostgresSchedules
from workly.storage.postgres_statements import DECODERS as _DECODERS
from workly.storage.postgres_statements import Connection, retrying_contention, use_schema
from workly.storage.postgres_statements import execute as _execute
from workly.storage.postgres_statements import fetch as _fetch
from workly.storage.postgres_statements import fetchrow as _fetchrow
from workly.storage.postgres_statements import fetchval as _fetchval
from workly.storage.postgres_stats import PostgresStats
from workly.storage.postgres_wakeups import PostgresWakeups
from workly.storage.postgres_webhooks import PostgresWebhooks
from workly.storage.queries import Query, postgres_queries
from workly.storage.tasks import check_transition

MIGRATION_TIMEOUT = 3600.0  # seconds; see migrate()

log = logging.getLogger("workly.storage")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """No reset query when a connection returns to the pool.

    asyncpg's default (UNLISTEN *, RESET ALL, …) is a round trip per release, for session
    state Workly never sets on pooled connections: LISTEN has a connection of its own and
    advisory locks are transaction-scoped. An open transaction is still rolled back.
    """


async def _init_connection(conn: asyncpg.Connection, schema: str) -> None:
    await conn.set_type_codec("json", encoder=to_json, decoder=from_json, schema="pg_catalog")
    await use_schema(conn, schema)


@raises_workly_errors(interpret_postgres_error)
class PostgresStorage(
    PostgresEnqueue, PostgresWebhooks, PostgresOperations, PostgresSchedules, PostgresStats, PostgresIndexes
):
    dialect = "postgres"

    def __init__(self, pool: asyncpg.Pool, dsn: str, schema: str | None = None) -> None:
        self._pool = pool
        self._dsn = dsn
        self._schema_given = schema is not None
        self._schema = schema or DEFAULT_SCHEMA
        self._q = postgres_queries()
        self.wakeups = PostgresWakeups(pool, dsn, self._q, self._schema)

    @classmethod
    async def open(
        cls, url: str, command_timeout: float = 10.0, schema: str | None = None
    ) -> PostgresStorage:
        """``schema`` holds Workly's tables and functions (WORKLY_DATABASE_SCHEMA; None: not
        configured, so public, unless an earlier install is found elsewhere): every connection
        runs with it alone on its search_path, so no statement names it."""
        dsn, size = split_pool_size(url)
        if schema is not None:
            check_schema_name(schema)
        pool = await asyncpg.create_pool(
            dsn,
            min_size=1,
            max_size=size,
            init=functools.partial(_init_connection, schema=schema or DEFAULT_SCHEMA),
            reset=_keep_session,
            command_timeout=command_timeout,
            # JIT compiles plans for analytics; for short queue statements it only adds latency.
            server_settings={"jit": "off", "application_name": "workly"},
        )
        return cls(pool, dsn, schema)

    async def close(self) -> None:
        await self.wakeups.close()
        await self._pool.close()

    async def needs_vacuum(self) -> bool:
        return not await _fetchval(self._pool, self._q.autovacuum_enabled)

    async def database_now(self) -> datetime:
        now: datetime = await _fetchval(self._pool, self._q.database_now)
        return now

    async def vacuum(self) -> None:
        await _execute(self._pool, self._q.vacuum)

    async def announce_work(self) -> None:
        await self.wakeups.announce_work()

    async def listen_for_work(
        self, on_work: Callable[[], None], sql_poll_interval: float | None = None
    ) -> None:
        await self.wakeups.listen(on_work, sql_poll_interval)

    async def set_sql_limits(self, max_body_bytes: int) -> None:
        await _execute(self._pool, self._q.set_sql_limits, max_body_bytes=max_body_bytes)

    async def ping(self) -> None:
        await self._pool.fetchval(self._q.ping.sql, timeout=2)

    async def migrate(self) -> list[int]:
        applied = []
        # READ COMMITTED whatever the server's default: a migration that counts a table
        # after locking it (0014) must see the writes committed while it waited.
        async with self._pool.acquire() as conn, conn.transaction(isolation="read_committed"):
            # Not bounded by the statement timeout: waiting for another process's migration,
            # or building an index over a large table, may rightly take minutes.
            await _execute(conn, self._q.lock_migrations, max_seconds=MIGRATION_TIMEOUT)
            # The migrations' string literals are written with it on, whatever the role or
            # the database set.
            await conn.execute("SET LOCAL standard_conforming_strings = on")
            if not self._schema_given:
                await self._refuse_an_install_elsewhere(conn)
            if not await _fetchval(conn, self._q.schema_exists, name=self._schema):
                await conn.execute(f'CREATE SCHEMA "{self._schema}"')  # a checked name
            await _execute(conn, self._q.create_schema_version)
            current = await _fetchval(conn, self._q.get_schema_version)
            todo = list(pending("postgres", current))
            if todo:
                # An index rebuild (postgres_indexes.py) holds a lock on its table that a
                # migration's DDL would wait for, with every enqueue and claim queued behind
                # the DDL: stop it; the next check starts again, after the migration.
                await _execute(conn, self._q.cancel_index_rebuilds, application=REINDEX_APPLICATION)
            for migration in todo:
                if not migration.is_empty:
                    await conn.execute(migration.for_schema(self._schema), timeout=MIGRATION_TIMEOUT)
                await _execute(conn, self._q.set_schema_version, version=migration.version)
                applied.append(migration.version)
        return applied

    async def check_install_location(self) -> None:
        if not self._schema_given:
            async with self._pool.acquire() as conn:
                await self._refuse_an_install_elsewhere(conn)

    async def _refuse_an_install_elsewhere(self, conn: Connection) -> None:
        """With no schema configured, an install may be in another schema (where a search_path
        put it before the schema was a setting): starting afresh in public would hide its tasks."""
        found = await _fetchval(conn, self._q.earlier_install_elsewhere)
        if found is not None:
            raise ConfigError(
                f"Workly's tables are in schema {found!r} and none are in public: set "
                f"WORKLY_DATABASE_SCHEMA={found} to use them (Workly no longer follows the search_path), "
                "or WORKLY_DATABASE_SCHEMA=public to start another install in public"
            )

    async def schema_version(self) -> int:
        async with self._pool.acquire() as conn:
            if not await _fetchval(conn, self._q.schema_version_exists):
                return 0  # nothing installed: said without creating anything
            version: int = await _fetchval(conn, self._q.get_schema_version)
            return version

    # --- tasks (enqueue: postgres_enqueue.py) ----------------------------------------
    async def get_task(self, task_id: str) -> Task | None:
        row = await _fetchrow(self._pool, self._q.get_task, id=task_id)
        return None if row is None else rows.task_from_row(row, _DECODERS)

    async def list_tasks(
        self, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        q = self._q
        page = rows.page_params(limit, before_seq)
        async with self._pool.acquire() as conn:
            if queue is None:
                if status is None:
                    found = await _fetch(conn, q.list_all_tasks, **page)
                else:
                    found = await _fetch(conn, q.list_all_tasks_by_status, status=status, **page)
            elif await _fetchrow(conn, q.get_queue, name=queue) is None:
                raise QueueNotFound(queue)
            elif status is None:
                found = await _fetch(conn, q.list_tasks, queue=queue, **page)
            else:
                found = await _fetch(conn, q.list_tasks_by_status, queue=queue, status=status, **page)
        shown, next_seq = rows.page(found, limit)
        return [rows.task_from_row(row, _DECODERS) for row in shown], next_seq

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        async with self._pool.acquire() as conn:
            if await _fetchrow(conn, self._q.get_task, id=task_id) is None:
                raise TaskNotFound(task_id)
            found = await _fetch(conn, self._q.list_attempts, id=task_id)
        return [rows.attempt_from_row(row, _DECODERS) for row in found]

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
                await _execute(conn, self._q.lock_queue_of_task, id=task_id)
            changed = await _fetchrow(conn, query, id=task_id, now=now, **more)
            row = await _fetchrow(conn, self._q.get_task, id=task_id)
        task = None if row is None else rows.task_from_row(row, _DECODERS)
        return check_transition(task_id, task, changed is not None, action)

    # --- dispatch ----------------------------------------------------------------
    async def claim_tasks(self, limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        params: dict[str, Any] = {
            "now": now, "limit": limit, "lease_token": lease_token, "lease_margin": lease_margin,
        }  # fmt: skip
        # Claims lock the same queue rows in every process: one PostgreSQL aborted to break a
        # deadlock runs again at once, not a poll interval later.
        found = await retrying_contention(lambda: _fetch(self._pool, self._q.claim_tasks, **params))
        # One row carries no task (seq is null): when to claim again.
        [hint] = [row for row in found if row["seq"] is None]
        claimed = sorted((row for row in found if row["seq"] is not None), key=_placed)
        return Claim(
            tasks=[rows.claimed_from_row(row, _DECODERS, lease_token) for row in claimed],
            rate_wait=hint["wait"],
            more=hint["more"],
        )

    async def record_results(
        self, results: Sequence[AttemptResult], now: datetime, rules: BreakerRules = BreakerRules()
    ) -> RecordSummary:
        if not results:
            return RecordSummary(accepted=0, stale=0)
        # The batch's last word per breaker (stale results too: the receiver did answer, or
        # fail). A receiver that answered is closed by the results statement itself;
        # failures go through the breaker rules right after it.
        plan = breakers.plan(results)
        params: dict[str, Any] = {
            "now": now,
            "task_seqs": [r.task_seq for r in results],
            "lease_tokens": [r.lease_token for r in results],
            "attempts": [r.attempt for r in results],
            "started_ats": [r.started_at for r in results],
            "finished_ats": [r.finished_at for r in results],
            "status_codes": [r.status_code for r in results],
            "errors": [r.error for r in results],
            "responses": [r.response for r in results],
            "outcomes": [r.outcome for r in results],
            "next_run_ats": [r.next_run_at for r in results],
            "sents": [r.sent for r in results],
            "ok_keys": plan.ok_keys,
            "held_until": HELD_UNTIL,
        }

        async def record() -> tuple[Any, breakers.Tally]:
            async with self._pool.acquire() as conn:
                if not plan.failing:  # the hot path: one statement
                    return await _fetchrow(conn, self._q.record_results, **params), breakers.Tally()
                # The rare path: the results and the breaker rules in one transaction.
                async with conn.transaction():
                    recorded = await _fetchrow(conn, self._q.record_results, **params)
                    return recorded, await self._apply_failures(conn, plan.failing, now, rules)

        # Run again whole when PostgreSQL broke a deadlock with it (another process's
        # breaker rules on the same receiver): otherwise the results are lost and the
        # tasks delivered again once their leases expire.
        recorded, tally = await retrying_contention(record)
        closed = recorded["closed_keys"]
        if closed:
            tally.closed += len(closed)
            # After the commit: a failure here must not fail the call, whose caller would
            # then record the results again. What stays held is freed by the probes' sweep
            # (free_stranded).
            try:
                async with self._pool.acquire() as conn:
                    tally.released += await self.release_held(conn, closed)
            except Exception as exc:
                if not isinstance(exc, StorageError) and interpret_postgres_error(exc) is None:
                    raise  # not the database's: a programming error
                log.warning(
                    "freeing the tasks of %d closed breaker(s) failed (%s); the sweep will", len(closed), exc
                )
        accepted: int = recorded["accepted"]
        return RecordSummary(
            accepted=accepted, stale=len(results) - accepted, released=tally.released,
            disabled=tuple(tally.disabled), opened=tally.opened, closed=tally.closed,
        )  # fmt: skip

    async def extend_leases(
        self, leases: Sequence[tuple[int, str]], now: datetime, lease_margin: float
    ) -> set[tuple[int, str]]:
        if not leases:
            return set()
        params: dict[str, Any] = {
            "now": now, "lease_margin": lease_margin, "seqs": [seq for seq, _ in leases],
            "lease_tokens": [token for _, token in leases],
        }  # fmt: skip
        extended = await retrying_contention(lambda: _fetch(self._pool, self._q.extend_leases, **params))
        return {(row["seq"], row["lease_token"]) for row in extended}

    async def prune_succeeded(self, before: datetime, limit: int = 1000) -> int:
        return len(await _fetch(self._pool, self._q.prune_succeeded, cutoff=before, limit=limit))

    async def reap_expired(self, now: datetime, limit: int = 1000) -> int:
        return len(
            await _fetch(self._pool, self._q.reap_expired, now=now, limit=limit, held_until=HELD_UNTIL)
        )

    async def recount_running(self) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            await _execute(conn, self._q.lock_queues)
            return len(await _fetch(conn, self._q.recount_running))

    # --- queues ------------------------------------------------------------------
    async def get_queue(self, name: str) -> Queue | None:
        async with self._pool.acquire() as conn:
            return await self._read_queue(conn, name)

    async def _read_queue(self, conn: Connection, name: str) -> Queue | None:
        row = await _fetchrow(conn, self._q.get_queue, name=name)
        if row is None:
            return None
        counts = rows.counts_by_queue(await _fetch(conn, self._q.count_tasks_of_queue, queue=name))
        return rows.queue_from_row(row, counts.get(name, rows.empty_counts()), _DECODERS)

    async def list_queues(self) -> list[Queue]:
        async with self._pool.acquire() as conn:
            found = await _fetch(conn, self._q.list_queues)
            counts = rows.counts_by_queue(await _fetch(conn, self._q.count_tasks))
        return [
            rows.queue_from_row(row, counts.get(row["name"], rows.empty_counts()), _DECODERS) for row in found
        ]

    async def put_queue(self, name: str, config: QueueConfig, now: datetime) -> tuple[Queue, bool]:
        async with self._pool.acquire() as conn:
            created = await _fetchval(conn, self._q.put_queue, **rows.config_params(name, config, now))
            queue = await self._read_queue(conn, name)
        if queue is None:  # deleted by another process right after this put
            raise QueueNotFound(name)
        return queue, bool(created)

    async def update_queue(self, name: str, change: QueueChange, now: datetime) -> Queue:
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                row = await _fetchrow(conn, self._q.get_queue_for_update, name=name)
                if row is None:
                    raise QueueNotFound(name)
                config = change(rows.queue_config_from_row(row))
                await _execute(conn, self._q.update_queue, **rows.config_params(name, config, now))
            queue = await self._read_queue(conn, name)
        if queue is None:
            raise QueueNotFound(name)
        return queue

    async def delete_queue(self, name: str) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            if await _fetchval(conn, self._q.delete_queue, name=name) is None:
                raise QueueNotFound(name)
            await _execute(conn, self._q.delete_queue_releases, queue=name)
            await _execute(conn, self._q.delete_queue_minutes, queue=name)

    async def purge_queue(self, name: str) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            if await _fetchrow(conn, self._q.get_queue_for_update, name=name) is None:
                raise QueueNotFound(name)
            purged: int = await _fetchval(conn, self._q.purge_queue, queue=name)
        return purged


def _placed(row: asyncpg.Record) -> tuple[int, int, datetime, int]:
    """The claim's order across queues (claim_rules.choose): place, priority, run_at, seq."""
    return (row["place"], -row["priority"], row["run_at"], row["seq"])
