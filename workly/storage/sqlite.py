"""SQLite backend: WAL, one writer connection (BEGIN IMMEDIATE), one reader connection.

Single process only. Each connection lives on its own thread (SqliteThread) and every
operation below is one function run there: a write is one BEGIN IMMEDIATE … COMMIT,
so the single writer is never interleaved and costs one hand-off per transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from workly.breaker import BreakerRules
from workly.database_url import sqlite_path
from workly.errors import ConfigError, QueueNotFound, TaskNotFound
from workly.json_text import to_json
from workly.models import (
    Attempt,
    AttemptResult,
    Claim,
    ClaimedTask,
    Enqueued,
    LeaseOffer,
    NewTask,
    Queue,
    QueueChange,
    QueueConfig,
    RecordSummary,
    Task,
    TaskStatus,
)
from workly.storage import breakers, rows, sqlite_claim
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import Query, sqlite_queries
from workly.storage.sqlite_enqueue import enqueue_on
from workly.storage.sqlite_operations import SqliteOperations
from workly.storage.sqlite_schedules import SqliteSchedules
from workly.storage.sqlite_statements import (
    DECODERS,
    execute,
    execute_many,
    fetchall,
    fetchone,
    migrate,
    schema_version,
    to_us,
)
from workly.storage.sqlite_stats import SqliteStats
from workly.storage.sqlite_thread import SqliteThread, SynchronousMode
from workly.storage.sqlite_webhooks import HELD_US, SqliteWebhooks, apply_breakers
from workly.storage.tasks import check_transition

Db = sqlite3.Connection
_MIN_SQLITE = (3, 38, 0)  # ->> operator, RETURNING, UPDATE … FROM
_q = sqlite_queries  # loaded at the first call, then cached
_DECODERS = DECODERS


@raises_workly_errors(interpret_sqlite_error)
class SqliteStorage(SqliteWebhooks, SqliteOperations, SqliteSchedules, SqliteStats):
    """``synchronous`` applies to every write the API acknowledges (enqueue, queue and task
    changes): FULL (the default) means a 201 survives a power loss. The dispatcher's own
    bookkeeping (claims, attempt results) always commits with NORMAL: it survives a
    process crash, and what a power loss may roll back is delivered again (same
    webhook-id), which at-least-once allows. See docs/reliability.md.
    """

    dialect = "sqlite"

    def __init__(self, writer: SqliteThread, reader: SqliteThread, synchronous: SynchronousMode) -> None:
        self._writer = writer
        self._reader = reader
        self._acknowledged = synchronous
        self._bookkeeping: SynchronousMode = "OFF" if synchronous == "OFF" else "NORMAL"

    @classmethod
    async def open(
        cls, url: str, synchronous: SynchronousMode = "FULL", busy_timeout: float = 10.0
    ) -> SqliteStorage:
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise ConfigError(f"SQLite {sqlite3.sqlite_version} is too old: Workly needs 3.38 or newer")
        path = sqlite_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        common = ["PRAGMA foreign_keys = ON", f"PRAGMA busy_timeout = {round(busy_timeout * 1000)}"]
        writer, reader = SqliteThread("writer"), SqliteThread("reader")
        try:
            await writer.open(path, [*common, "PRAGMA journal_mode = WAL"])
            await reader.open(path, [*common, "PRAGMA query_only = ON"])
        except BaseException:
            await reader.close()
            await writer.close()
            raise
        return cls(writer, reader, synchronous)

    async def close(self) -> None:
        await self._reader.close()
        await self._writer.close()

    async def ping(self) -> None:
        await self._reader.run(fetchall, _q().ping)

    async def needs_vacuum(self) -> bool:
        return False  # rows are updated in place: no dead versions pile up

    async def database_now(self) -> None:
        return None  # a file of this host: its clock is this host's

    async def vacuum(self) -> None:
        """Nothing to do (see needs_vacuum)."""

    async def rebuild_bloated_indexes(self) -> list[str]:
        return []  # deletes rebalance SQLite's B-trees: underfull pages merge, empty ones are reused

    async def announce_work(self) -> None:
        """Single process: the enqueuer already woke the only dispatcher."""

    async def listen_for_work(
        self, on_work: Callable[[], None], sql_poll_interval: float | None = None
    ) -> None:
        """Single process: nobody else announces work."""

    async def set_sql_limits(self, max_body_bytes: int) -> None:
        """SQLite has no SQL functions to tell."""

    async def migrate(self) -> list[int]:
        return await self._writer.transaction(self._acknowledged, migrate)

    async def schema_version(self) -> int:
        return await self._writer.transaction(self._acknowledged, schema_version)

    # --- tasks -------------------------------------------------------------------
    async def enqueue(
        self, tasks: Sequence[NewTask], now: datetime, offer: LeaseOffer | None = None
    ) -> list[Enqueued]:
        return await self._writer.transaction(self._acknowledged, enqueue_on, tasks, to_us(now), offer)

    async def leased_tasks(self, ids: Sequence[str], lease_token: str) -> list[ClaimedTask]:
        params = {"ids": to_json(list(ids)), "lease_token": lease_token}
        found = await self._reader.run(fetchall, _q().get_leased_tasks, params)
        return [rows.claimed_from_row(row, _DECODERS, lease_token) for row in found]

    async def get_task(self, task_id: str) -> Task | None:
        return await self._reader.run(_get_task, task_id)

    async def list_tasks(
        self, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        return await self._reader.run(_list_tasks, queue, status, limit, before_seq)

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        return await self._reader.run(_list_attempts, task_id)

    async def cancel_task(self, task_id: str, now: datetime) -> Task:
        return await self._writer.transaction(
            self._acknowledged, _transition, _q().cancel_task, task_id, to_us(now), "cancel"
        )

    async def retry_task(self, task_id: str, now: datetime) -> Task:
        return await self._writer.transaction(
            self._acknowledged, _transition, _q().retry_task, task_id, to_us(now), "retry", HELD_US
        )

    # --- dispatch ----------------------------------------------------------------
    async def claim_tasks(self, limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        return await self._writer.transaction(
            self._bookkeeping, sqlite_claim.claim, limit, to_us(now), lease_token, lease_margin, _DECODERS
        )

    async def record_results(
        self, results: Sequence[AttemptResult], now: datetime, rules: BreakerRules = BreakerRules()
    ) -> RecordSummary:
        if not results:
            return RecordSummary(accepted=0, stale=0)
        return await self._writer.transaction(self._bookkeeping, _record, results, to_us(now), rules)

    async def extend_leases(
        self, leases: Sequence[tuple[int, str]], now: datetime, lease_margin: float
    ) -> set[tuple[int, str]]:
        if not leases:
            return set()
        params = {"now": to_us(now), "lease_margin": lease_margin, "leases": to_json(list(leases))}
        return await self._writer.transaction(self._bookkeeping, _leases_extended, params)

    async def prune_succeeded(self, before: datetime, limit: int = 1000) -> int:
        params = {"cutoff": to_us(before), "limit": limit}
        return await self._writer.transaction(self._bookkeeping, _count_rows, _q().prune_succeeded, params)

    async def recount_running(self) -> int:
        return 0  # nothing to repair: the claim counts running tasks itself (one writer)

    async def reap_expired(self, now: datetime, limit: int = 1000) -> int:
        return await self._writer.transaction(self._bookkeeping, _reap, to_us(now), limit)

    # --- queues ------------------------------------------------------------------
    async def get_queue(self, name: str) -> Queue | None:
        return await self._reader.run(_read_queue, name)

    async def list_queues(self) -> list[Queue]:
        return await self._reader.run(_list_queues)

    async def put_queue(self, name: str, config: QueueConfig, now: datetime) -> tuple[Queue, bool]:
        return await self._writer.transaction(self._acknowledged, _put_queue, name, config, to_us(now))

    async def update_queue(self, name: str, change: QueueChange, now: datetime) -> Queue:
        return await self._writer.transaction(self._acknowledged, _update_queue, name, change, to_us(now))

    async def check_install_location(self) -> None:
        """A SQLite file is the install: there is nowhere else to look."""

    async def delete_queue(self, name: str) -> None:
        await self._writer.transaction(self._acknowledged, _delete_queue, name)

    async def purge_queue(self, name: str) -> int:
        return await self._writer.transaction(self._acknowledged, _purge_queue, name)


# --- what runs on the connection threads ------------------------------------------
# Each function takes the connection first; writes run inside BEGIN IMMEDIATE.


def _get_task(db: Db, task_id: str) -> Task | None:
    row = fetchone(db, _q().get_task, {"id": task_id})
    return None if row is None else rows.task_from_row(row, _DECODERS)


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
    return [rows.task_from_row(row, _DECODERS) for row in shown], next_seq


def _list_attempts(db: Db, task_id: str) -> list[Attempt]:
    if fetchone(db, _q().get_task, {"id": task_id}) is None:
        raise TaskNotFound(task_id)
    return [
        rows.attempt_from_row(row, _DECODERS) for row in fetchall(db, _q().list_attempts, {"id": task_id})
    ]


def _transition(
    db: Db, query: Query, task_id: str, now_us: int, action: str, held_until: int | None = None
) -> Task:
    params: dict[str, Any] = {"id": task_id, "now": now_us}
    if held_until is not None:
        params["held_until"] = held_until
    changed = fetchall(db, query, params)
    return check_transition(task_id, _get_task(db, task_id), bool(changed), action)


def _record(db: Db, results: Sequence[AttemptResult], now_us: int, rules: BreakerRules) -> RecordSummary:
    payload = to_json(
        [
            {
                "task_seq": r.task_seq,
                "lease_token": r.lease_token,
                "outcome": r.outcome,
                "next_run_at": None if r.next_run_at is None else to_us(r.next_run_at),
                "status_code": r.status_code,
                "error": r.error,
                "sent": r.sent,
            }
            for r in results
        ]
    )
    plan = breakers.plan(results)
    params = {"results": payload, "now": now_us, "ok_keys": to_json(plan.ok_keys), "held_until": HELD_US}
    accepted = _accepted(db, results, params)
    execute_many(
        db,
        _q().record_results_attempts,
        [
            {
                "task_seq": r.task_seq,
                "attempt": r.attempt,
                "started_at": to_us(r.started_at),
                "finished_at": to_us(r.finished_at),
                "status_code": r.status_code,
                "error": r.error,
                "response": r.response,
                "stale": (r.task_seq, r.lease_token) not in accepted,
            }
            for r in results
            if r.sent
        ],
    )
    stale = sum(1 for r in results if (r.task_seq, r.lease_token) not in accepted)
    tally = apply_breakers(db, plan, now_us, rules)
    return RecordSummary(
        accepted=len(results) - stale, stale=stale, released=tally.released, disabled=tuple(tally.disabled),
        opened=tally.opened, closed=tally.closed,
    )  # fmt: skip


def _accepted(db: Db, results: Sequence[AttemptResult], params: Mapping[str, Any]) -> set[tuple[int, str]]:
    """Run record_results; the (task seq, lease token) pairs it accepted. Only a batch with
    two results of one task (a stale one, and the current one of the claim the reaper gave
    it to meanwhile) needs the current leases read first to tell them apart."""
    seqs = [r.task_seq for r in results]
    current = None
    if len(set(seqs)) < len(seqs):
        found = fetchall(db, _q().record_results_leases, {"seqs": to_json(seqs)})
        current = {(row["seq"], row["lease_token"]) for row in found}
    updated = {row["seq"] for row in fetchall(db, _q().record_results, params)}
    if current is None:
        return {(r.task_seq, r.lease_token) for r in results if r.task_seq in updated}
    return {(seq, token) for seq, token in current if seq in updated}


def _count_rows(db: Db, query: Query, params: Mapping[str, Any]) -> int:
    return len(fetchall(db, query, params))


def _leases_extended(db: Db, params: Mapping[str, Any]) -> set[tuple[int, str]]:
    return {(row["seq"], row["lease_token"]) for row in fetchall(db, _q().extend_leases, params)}


def _reap(db: Db, now_us: int, limit: int) -> int:
    params = {"now": now_us, "limit": limit}
    seqs = [row["task_seq"] for row in fetchall(db, _q().reap_expired_attempts, params)]
    if seqs:
        execute(db, _q().reap_expired, {"now": now_us, "seqs": to_json(seqs), "held_until": HELD_US})
    return len(seqs)


def _read_queue(db: Db, name: str) -> Queue | None:
    row = fetchone(db, _q().get_queue, {"name": name})
    if row is None:
        return None
    counts = rows.counts_by_queue(fetchall(db, _q().count_tasks_of_queue, {"queue": name}))
    return rows.queue_from_row(row, counts.get(name, rows.empty_counts()), _DECODERS)


def _list_queues(db: Db) -> list[Queue]:
    counts = rows.counts_by_queue(fetchall(db, _q().count_tasks))
    return [
        rows.queue_from_row(row, counts.get(row["name"], rows.empty_counts()), _DECODERS)
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
