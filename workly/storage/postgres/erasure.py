"""PostgreSQL's tenant erasure (an operation of workly/operations.py with action ``erase``,
docs/retention.md): one phase step per chunk (workly/lifecycle.py's ErasePhase), in the
caller's transaction, which holds the operation's row."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from workly.json_text import to_json
from workly.lifecycle import ErasePhase
from workly.operations import ChunkDone, Operation
from workly.storage.operation_rows import hashed, operation_from_row
from workly.storage.postgres.statements import DECODERS, Connection, execute, fetch, fetchrow
from workly.storage.queries import PostgresQueries


async def create_erase(
    conn: Connection, q: PostgresQueries, operation_id: str, tenant: str, now: datetime
) -> Any:
    """The tenant's running erase if there is one, else a new one; None if nothing names
    the tenant."""
    running = await fetchrow(conn, q.running_erase, tenant=tenant)
    if running is not None:
        return running
    if not (await fetchrow(conn, q.tenant_known, tenant=tenant))["known"]:
        return None
    named = to_json({"tenant": tenant})
    return await fetchrow(
        conn, q.insert_erase_operation, id=operation_id, filter=named, tenant=tenant, now=now
    )


async def erase_chunk(
    conn: Connection, q: PostgresQueries, op: Any, operation: Operation, now: datetime,
    lease_seconds: float, chunk: int,
) -> ChunkDone:  # fmt: skip
    tenant = str(operation.filter.tenant)
    phase: ErasePhase = op["phase"] or "access"
    after_seq = op["after_seq"]
    deleted = 0
    if phase == "access":
        await _access(conn, q, operation.id, tenant, now)
        phase = "endpoints"
    elif phase == "endpoints":
        endpoint = await fetchrow(conn, q.erase_next_endpoint, tenant=tenant)
        if endpoint is None:
            phase = "events"
        else:
            erased = await fetchrow(conn, q.erase_queue_tasks, queue=endpoint["id"], chunk=chunk)
            deleted = erased["deleted"]
            if deleted < chunk:
                await _drop_endpoint(conn, q, endpoint["id"])
    elif phase == "events":
        erased = await fetchrow(conn, q.erase_events, tenant=tenant, chunk=chunk)
        deleted = erased["events"] + erased["deliveries"]
        phase = "events" if erased["events"] == chunk else "tasks"
    elif phase == "tasks":
        deleted = (await fetchrow(conn, q.erase_tenant_tasks, tenant=tenant, chunk=chunk))["deleted"]
        if deleted < chunk:
            phase, after_seq = "notices", 0
    elif phase == "notices":
        erased = await fetchrow(conn, q.erase_notices, tenant=tenant, after_seq=after_seq, chunk=chunk)
        deleted = erased["events"] + erased["deliveries"]
        after_seq = erased["last_seq"] or after_seq
        phase = "notices" if erased["scanned"] == chunk else "tenant"
    else:
        await execute(conn, q.erase_tenant_row, tenant=tenant)
        finished = await fetchrow(
            conn, q.finish_erase, id=operation.id, filter=hashed(tenant), changed=0, now=now
        )
        return ChunkDone(operation_from_row(finished, DECODERS), 0)
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


async def _drop_endpoint(conn: Connection, q: PostgresQueries, endpoint_id: str) -> None:
    await execute(conn, q.delete_queue, name=endpoint_id)  # the endpoint and its turns cascade
    await execute(conn, q.delete_queue_releases, queue=endpoint_id)
    await execute(conn, q.delete_breaker, key=endpoint_id)
    await execute(conn, q.erase_minutes, name=endpoint_id)
