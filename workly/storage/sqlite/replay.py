"""SQLite's replay chunks (an operation of workly/operations.py with action ``replay``): the
endpoint's missing deliveries, a chunk of events at a time (docs/webhooks.md). One writer:
the whole chunk runs in its BEGIN IMMEDIATE transaction, nothing comes in between."""

from __future__ import annotations

import sqlite3

from workly.ids import new_task_id
from workly.json_text import to_json
from workly.operations import ENDPOINT_GONE, ChunkDone, Operation
from workly.storage import webhook_rows
from workly.storage.operation_rows import operation_from_row
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import DECODERS, HELD_US, SqliteRow, fetchall, fetchone, to_us
from workly.storage.sqlite.webhooks import types_of

_SECOND_US = 1_000_000


def replay_chunk(
    db: sqlite3.Connection, op: SqliteRow, operation: Operation, now_us: int, lease_seconds: float, chunk: int
) -> ChunkDone:
    q = sqlite_queries()
    endpoint_id = operation.filter.endpoint_id
    endpoint = fetchone(db, q.lock_replay_endpoint, {"id": endpoint_id})
    if endpoint is None:
        [failed] = fetchall(db, q.fail_operation, {"id": operation.id, "error": ENDPOINT_GONE, "now": now_us})
        return ChunkDone(operation_from_row(failed, DECODERS), 0)
    since = operation.filter.created_after
    window = {"after_seq": op["after_seq"], "upto_seq": op["upto_seq"], "chunk": chunk,
              "since": 0 if since is None else to_us(since)}  # fmt: skip
    tenant = endpoint["tenant"]
    events = (
        fetchall(db, q.replay_events_untenanted, window)
        if tenant is None
        else fetchall(db, q.replay_events, {**window, "tenant": tenant})
    )
    taken = webhook_rows.replayed(events, endpoint, DECODERS, types_of)
    changed = 0
    if taken:
        cursor = db.executemany(q.replay_deliveries.sql, [
            q.replay_deliveries.check({
                "task_id": new_task_id(), "event_id": event_id, "endpoint_id": endpoint_id,
                "url": endpoint["url"], "headers": to_json(headers), "body": body, "now": now_us,
                "held_until": HELD_US,
            })
            for event_id, body, headers in taken
        ])  # fmt: skip
        changed = cursor.rowcount
    [advanced] = fetchall(db, q.advance_operation, {
        "id": operation.id, "after_seq": events[-1]["seq"] if events else op["after_seq"],
        "changed": changed, "skipped": len(events) - changed, "done": len(events) < chunk, "now": now_us,
        "lease_until": now_us + int(lease_seconds * _SECOND_US),
    })  # fmt: skip
    return ChunkDone(operation_from_row(advanced, DECODERS), changed)
