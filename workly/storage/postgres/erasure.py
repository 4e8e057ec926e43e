"""PostgreSQL's tenant erasure (an operation of workly/operations.py with action ``erase``,
docs/retention.md): one phase step per chunk (workly/lifecycle.py's ErasePhase and
next_phase), in the caller's transaction, which holds the operation's row."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from workly.json_text import to_json
from workly.lifecycle import ErasePhase, next_phase
from workly.operations import ChunkDone, Operation
from workly.storage.operation_rows import hashed, operation_from_row
from workly.storage.postgres.statements import DECODERS, Connection, execute, fetch, fetchrow
from workly.storage.queries import PostgresQueries


async def create_erase(
    conn: Connection, q: PostgresQueries, operation_id: str, tenant: str, now: datetime
) -> Any:
    """The tenant's running erase if there is one, else a new one; None if nothing names
    the tenant. In the caller's transaction, under the tenant's erase lock."""
    await fetchrow(conn, q.lock_erase, tenant=tenant)
    running = await fetchrow(conn, q.running_erase, tenant=tenant)
    if running is not None:
        return running
    if not (await fetchrow(conn, q.tenant_known, tenant=tenant))["known"]:
        return None
    named = to_json({"tenant": tenant})
    return await fetchrow(conn, q.insert_erase_operation, id=operation_id, filter=named, tenant=tenant,
                          now=now)  # fmt: skip


async def erase_chunk(
    conn: Connection, q: PostgresQueries, op: Any, operation: Operation, now: datetime,
    lease_seconds: float, chunk: int,
) -> ChunkDone:  # fmt: skip
    tenant = str(operation.filter.tenant)
    phase: ErasePhase = op["phase"] or "access"
    after_seq: int = op["after_seq"]
    if phase == "tenant":
        await _access(conn, q, operation.id, tenant, now)
        deleted = (await _events(conn, q, tenant, chunk))[0] + await _plain_tasks(conn, q, tenant, chunk)
        if deleted:  # published or enqueued for it meanwhile: round again
            return await _advance(conn, q, operation, "events", 0, deleted, now, lease_seconds)
        await execute(conn, q.erase_tenant_row, tenant=tenant)
        finished = await fetchrow(conn, q.finish_erase, id=operation.id, filter=hashed(tenant), changed=0,
                                  now=now)  # fmt: skip
        return ChunkDone(operation_from_row(finished, DECODERS), 0)
    deleted, done = 0, True
    if phase == "access":
        await _access(conn, q, operation.id, tenant, now)
    elif phase == "endpoints":
        endpoint = await fetchrow(conn, q.erase_next_endpoint, tenant=tenant)
        if endpoint is not None:
            deleted, done = await _endpoint(conn, q, endpoint["id"], chunk), False
    elif phase == "events":
        deleted, full = await _events(conn, q, tenant, chunk)
        done = not full
    elif phase == "tasks":
        deleted = await _plain_tasks(conn, q, tenant, chunk)
        done, after_seq = deleted < chunk, 0
    else:  # notices
        erased = await fetchrow(conn, q.erase_notices, tenant=tenant, after_seq=after_seq, chunk=chunk)
        deleted = erased["events"] + erased["deliveries"]
        after_seq, done = erased["last_seq"] or after_seq, erased["scanned"] < chunk
    return await _advance(conn, q, operation, next_phase(phase, done), after_seq, deleted, now, lease_seconds)


async def _advance(
    conn: Connection, q: PostgresQueries, operation: Operation, phase: ErasePhase, after_seq: int,
    deleted: int, now: datetime, lease_seconds: float,
) -> ChunkDone:  # fmt: skip
    advanced = await fetchrow(
        conn, q.advance_erase, id=operation.id, phase=phase, after_seq=after_seq, changed=deleted, now=now,
        lease_until=now + timedelta(seconds=lease_seconds),
    )  # fmt: skip
    return ChunkDone(operation_from_row(advanced, DECODERS), deleted)


async def _access(
    conn: Connection, q: PostgresQueries, operation_id: str, tenant: str, now: datetime
) -> None:
    await execute(conn, q.erase_keys, tenant=tenant)
    await execute(conn, q.erase_turns, tenant=tenant)
    await execute(conn, q.erase_schedules, tenant=tenant)
    for row in await fetch(conn, q.operations_naming_tenant, id=operation_id, tenant=tenant):
        await execute(conn, q.redact_operation, id=row["id"], filter=hashed(tenant, row["filter"]))
    await execute(conn, q.erase_hold_endpoints, tenant=tenant, now=now)


async def _endpoint(conn: Connection, q: PostgresQueries, endpoint_id: str, chunk: int) -> int:
    """A chunk of the endpoint's deliveries; the endpoint too once they are all gone."""
    deleted: int = (await fetchrow(conn, q.erase_queue_tasks, queue=endpoint_id, chunk=chunk))["deleted"]
    if deleted < chunk:
        await execute(conn, q.delete_queue, name=endpoint_id)  # the endpoint and its turns cascade
        await execute(conn, q.delete_queue_releases, queue=endpoint_id)
        await execute(conn, q.delete_breaker, key=endpoint_id)
        await execute(conn, q.erase_minutes, name=endpoint_id)
    return deleted


async def _events(conn: Connection, q: PostgresQueries, tenant: str, chunk: int) -> tuple[int, bool]:
    """A chunk of its events with what is left of their deliveries: how many of both, and
    whether it was a whole chunk of events (more may follow)."""
    erased = await fetchrow(conn, q.erase_events, tenant=tenant, chunk=chunk)
    return erased["events"] + erased["deliveries"], erased["events"] == chunk


async def _plain_tasks(conn: Connection, q: PostgresQueries, tenant: str, chunk: int) -> int:
    deleted: int = (await fetchrow(conn, q.erase_tenant_tasks, tenant=tenant, chunk=chunk))["deleted"]
    return deleted
