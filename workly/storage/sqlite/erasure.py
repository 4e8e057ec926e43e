"""SQLite's tenant erasure (see storage/postgres/erasure.py): one phase step per chunk, on
the writer, in the chunk's transaction. Ids are read first, then deleted by seq, with the
callbacks made of them (SQLite has no DELETE inside a WITH)."""

from __future__ import annotations

import sqlite3

from workly.json_text import to_json
from workly.lifecycle import ErasePhase, next_phase
from workly.operations import ChunkDone, Operation
from workly.storage.operation_rows import hashed, operation_from_row
from workly.storage.queries import Query, sqlite_queries
from workly.storage.sqlite.statements import DECODERS, SqliteRow, execute, fetchall, fetchone

Db = sqlite3.Connection
_q = sqlite_queries
_SECOND_US = 1_000_000


def count_erase(db: Db, tenant: str) -> tuple[bool, int]:
    """On the reader: whether anything names the tenant, and what its erase will match
    (counted here, so that the writer does not wait on the counting)."""
    known = fetchone(db, _q().tenant_known, {"tenant": tenant})
    counted = fetchone(db, _q().insert_erase_operation_count, {"tenant": tenant})
    return bool(known and known["known"]), int(counted["matched"]) if counted else 0


def create_erase(db: Db, operation_id: str, tenant: str, matched: int, now_us: int) -> SqliteRow:
    """On the writer: the tenant's running erase if there is one, else a new one."""
    running = fetchone(db, _q().running_erase, {"tenant": tenant})
    if running is not None:
        return running
    params = {"id": operation_id, "filter": to_json({"tenant": tenant}), "matched": matched, "now": now_us}
    return fetchall(db, _q().insert_erase_operation, params)[0]


def erase_chunk(
    db: Db, op: SqliteRow, operation: Operation, now_us: int, lease_seconds: float, chunk: int
) -> ChunkDone:
    q = _q()
    tenant = str(operation.filter.tenant)
    phase: ErasePhase = op["phase"] or "access"
    after_seq: int = op["after_seq"]
    if phase == "tenant":
        _access(db, operation.id, tenant, now_us)
        deleted = _events(db, tenant, chunk)[0] + _plain_tasks(db, tenant, chunk)
        if deleted:  # published or enqueued for it meanwhile: round again
            return _advance(db, operation, "events", 0, deleted, now_us, lease_seconds)
        execute(db, q.erase_tenant_row, {"tenant": tenant})
        params = {"id": operation.id, "filter": hashed(tenant), "changed": 0, "now": now_us}
        return ChunkDone(operation_from_row(fetchall(db, q.finish_erase, params)[0], DECODERS), 0)
    deleted, done = 0, True
    if phase == "access":
        _access(db, operation.id, tenant, now_us)
    elif phase == "endpoints":
        endpoint = fetchone(db, q.erase_next_endpoint, {"tenant": tenant})
        if endpoint is not None:
            deleted, done = _endpoint(db, endpoint["id"], chunk), False
    elif phase == "events":
        deleted, full = _events(db, tenant, chunk)
        done = not full
    elif phase == "tasks":
        deleted = _plain_tasks(db, tenant, chunk)
        done, after_seq = deleted < chunk, 0
    else:  # notices
        scanned = fetchall(db, q.erase_notices_scanned, {"after_seq": after_seq, "chunk": chunk})
        deleted = _delete_events(db, [row for row in scanned if row["tenant"] == tenant], q.erase_notices)
        after_seq = scanned[-1]["seq"] if scanned else after_seq
        done = len(scanned) < chunk
    return _advance(db, operation, next_phase(phase, done), after_seq, deleted, now_us, lease_seconds)


def _advance(
    db: Db, operation: Operation, phase: ErasePhase, after_seq: int, deleted: int, now_us: int,
    lease_seconds: float,
) -> ChunkDone:  # fmt: skip
    params = {"id": operation.id, "phase": phase, "after_seq": after_seq, "changed": deleted, "now": now_us,
              "lease_until": now_us + int(lease_seconds * _SECOND_US)}  # fmt: skip
    return ChunkDone(operation_from_row(fetchall(db, _q().advance_erase, params)[0], DECODERS), deleted)


def _access(db: Db, operation_id: str, tenant: str, now_us: int) -> None:
    q = _q()
    execute(db, q.erase_keys_sessions, {"tenant": tenant})
    fetchall(db, q.erase_keys, {"tenant": tenant})
    execute(db, q.erase_turns, {"tenant": tenant})
    fetchall(db, q.erase_schedules, {"tenant": tenant})
    for row in fetchall(db, q.operations_naming_tenant, {"id": operation_id, "tenant": tenant}):
        execute(db, q.redact_operation, {"id": row["id"], "filter": hashed(tenant, row["filter"])})
    execute(db, q.erase_hold_endpoints_queues, {"tenant": tenant, "now": now_us})
    execute(db, q.erase_hold_endpoints, {"tenant": tenant, "now": now_us})


def _endpoint(db: Db, endpoint_id: str, chunk: int) -> int:
    """A chunk of the endpoint's deliveries; the endpoint too once they are all gone."""
    found = fetchall(db, _q().erase_queue_tasks_ids, {"queue": endpoint_id, "chunk": chunk})
    deleted = _delete_tasks(db, found, _q().erase_queue_tasks)
    if deleted < chunk:
        execute(db, _q().delete_queue, {"name": endpoint_id})  # the endpoint and its turns cascade
        execute(db, _q().delete_breaker, {"key": endpoint_id})
        execute(db, _q().erase_minutes, {"name": endpoint_id})
    return deleted


def _events(db: Db, tenant: str, chunk: int) -> tuple[int, bool]:
    """A chunk of its events with what is left of their deliveries: how many of both, and
    whether it was a whole chunk of events (more may follow)."""
    events = fetchall(db, _q().erase_events_ids, {"tenant": tenant, "chunk": chunk})
    return _delete_events(db, events, _q().erase_events), len(events) == chunk


def _plain_tasks(db: Db, tenant: str, chunk: int) -> int:
    found = fetchall(db, _q().erase_tenant_tasks_ids, {"tenant": tenant, "chunk": chunk})
    return _delete_tasks(db, found, _q().erase_tenant_tasks)


def _delete_tasks(db: Db, found: list[SqliteRow], delete: Query) -> int:
    """Tasks (rows with their seq and id) and the callbacks made of them, ``delete`` taking
    their seqs; how many tasks."""
    if not found:
        return 0
    execute(db, _q().erase_events_callbacks, {"ids": to_json([row["id"] for row in found])})
    return len(fetchall(db, delete, {"seqs": to_json([row["seq"] for row in found])}))


def _delete_events(db: Db, events: list[SqliteRow], delete: Query) -> int:
    """Events (rows with their seq and id) with their deliveries, ``delete`` taking the
    events' seqs; how many of both."""
    if not events:
        return 0
    found = fetchall(db, _q().erase_events_deliveries, {"ids": to_json([row["id"] for row in events])})
    deliveries = _delete_tasks(db, found, _q().erase_events_delete_deliveries)
    return len(fetchall(db, delete, {"seqs": to_json([row["seq"] for row in events])})) + deliveries
