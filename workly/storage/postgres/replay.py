"""PostgreSQL's replay chunks (an operation of workly/operations.py with action ``replay``):
the endpoint's missing deliveries, a chunk of events at a time (docs/webhooks.md)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from workly.breaker import HELD_UNTIL
from workly.ids import new_task_id
from workly.json_text import to_json
from workly.operations import ENDPOINT_GONE, ChunkDone, Operation
from workly.storage import webhook_rows
from workly.storage.operation_rows import operation_from_row
from workly.storage.postgres.statements import DECODERS, Connection, fetch, fetchrow
from workly.storage.postgres.webhooks import types_of
from workly.storage.queries import PostgresQueries


async def replay_chunk(
    conn: Connection, q: PostgresQueries, op: Any, operation: Operation, now: datetime,
    lease_seconds: float, chunk: int,
) -> ChunkDone:  # fmt: skip
    """One chunk, in the caller's transaction (which holds the operation's row)."""
    endpoint_id = operation.filter.endpoint_id
    endpoint = await fetchrow(conn, q.lock_replay_endpoint, id=endpoint_id)
    if endpoint is None:
        failed = await fetchrow(conn, q.fail_operation, id=operation.id, error=ENDPOINT_GONE, now=now)
        return ChunkDone(operation_from_row(failed, DECODERS), 0)
    window = {"after_seq": op["after_seq"], "upto_seq": op["upto_seq"], "chunk": chunk,
              "since": operation.filter.created_after}  # fmt: skip
    tenant = endpoint["tenant"]
    events = await (
        fetch(conn, q.replay_events_untenanted, **window)
        if tenant is None
        else fetch(conn, q.replay_events, tenant=tenant, **window)
    )
    taken = webhook_rows.replayed(events, endpoint, DECODERS, types_of)
    changed = 0
    if taken:
        inserted = await fetch(
            conn, q.replay_deliveries, endpoint_id=endpoint_id, url=endpoint["url"],
            task_ids=[new_task_id() for _ in taken], event_ids=[event_id for event_id, _, _ in taken],
            bodies=[body for _, body, _ in taken],
            headers=[to_json(headers) for _, _, headers in taken],
            now=now, held_until=HELD_UNTIL,
        )  # fmt: skip
        changed = len(inserted)
    last_seq = events[-1]["seq"] if events else op["after_seq"]
    advanced = await fetchrow(
        conn, q.advance_operation, id=operation.id, after_seq=last_seq,
        changed=changed, skipped=len(events) - changed, done=len(events) < chunk, now=now,
        lease_until=now + timedelta(seconds=lease_seconds),
    )  # fmt: skip
    return ChunkDone(operation_from_row(advanced, DECODERS), changed)
