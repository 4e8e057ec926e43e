"""SQLite's bulk operations (OperationStore, workly/operations.py) and due callbacks
(CallbackStore, workly/callbacks.py); the queries are in sql/operations.sql.

Each write runs inside one BEGIN IMMEDIATE transaction on the writer, so a chunk and its
progress commit together."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Literal, cast

from workly.callbacks import DueCallback
from workly.errors import EndpointNotFound, ReplayRunning, TenantNotFound
from workly.json_text import to_json
from workly.operations import CHUNK, Action, ChunkDone, Operation, TaskFilter
from workly.storage import rows
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.operation_rows import due_callback_from_row, filter_params, operation_from_row
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.erasure import count_erase, create_erase, erase_chunk
from workly.storage.sqlite.replay import replay_chunk
from workly.storage.sqlite.statements import (
    DECODERS,
    HELD_US,
    Connections,
    SqliteRow,
    fetchall,
    fetchone,
    to_us,
)

Db = sqlite3.Connection
_q = sqlite_queries
_SECOND_US = 1_000_000
# Rows an erase's chunk deletes on SQLite: each delete takes its attempts, callbacks, counts
# and 17 index entries, with every enqueue and claim waiting behind the one writer meanwhile
# (docs/performance.md, "Erasing a tenant").
ERASE_CHUNK = 200


@raises_workly_errors(interpret_sqlite_error)
class SqliteOperations:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def create_operation(
        self, operation_id: str, action: Action, task_filter: TaskFilter, now: datetime
    ) -> Operation:
        if action == "replay":
            return await self._writer.transaction(
                self._acknowledged, _create_replay, operation_id, task_filter, to_us(now)
            )
        if action == "erase":
            tenant = str(task_filter.tenant)
            known, matched = await self._reader.run(count_erase, tenant)
            if not known:
                raise TenantNotFound(tenant)
            row = await self._writer.transaction(
                self._acknowledged, create_erase, operation_id, tenant, matched, to_us(now)
            )
            return operation_from_row(row, DECODERS)
        params = filter_params(task_filter, to_us)
        [counted] = await self._reader.run(fetchall, _q().insert_operation_count, params)
        return await self._writer.transaction(
            self._acknowledged, _create_operation, operation_id, action, task_filter, counted, to_us(now)
        )

    async def get_operation(self, operation_id: str) -> Operation | None:
        row = await self._reader.run(fetchone, _q().get_operation, {"id": operation_id})
        return None if row is None else operation_from_row(row, DECODERS)

    async def list_operations(self, limit: int, before_seq: int | None) -> tuple[list[Operation], int | None]:
        found = await self._reader.run(fetchall, _q().list_operations, rows.page_params(limit, before_seq))
        shown, next_seq = rows.page(found, limit)
        return [operation_from_row(row, DECODERS) for row in shown], next_seq

    async def take_operation(self, now: datetime, lease_token: str, lease_seconds: float) -> Operation | None:
        params = {
            "now": to_us(now),
            "lease_token": lease_token,
            "lease_until": to_us(now) + int(lease_seconds * _SECOND_US),
        }
        # fetchall: a RETURNING statement must run to its end before the COMMIT.
        taken = await self._writer.transaction(self._acknowledged, fetchall, _q().take_operation, params)
        return operation_from_row(taken[0], DECODERS) if taken else None

    async def release_operation(self, operation_id: str, lease_token: str) -> bool:
        params = {"id": operation_id, "lease_token": lease_token}
        released = await self._writer.transaction(
            self._acknowledged, fetchall, _q().release_operation, params
        )
        return bool(released)

    async def run_operation_chunk(
        self, operation_id: str, lease_token: str, now: datetime, lease_seconds: float, chunk: int = CHUNK
    ) -> ChunkDone | None:
        found = await self._reader.run(_read_chunk, operation_id, lease_token, chunk)
        if isinstance(found, str):  # a replay or an erase: through events and more, on the writer alone
            if found == "erase":  # its deletes are the heaviest chunk: the one writer is held shorter
                chunk = min(chunk, ERASE_CHUNK)
            return await self._writer.transaction(
                self._acknowledged, _on_writer, operation_id, lease_token, to_us(now), lease_seconds, chunk
            )
        if found is None:
            return None
        after_seq, seqs = found
        return await self._writer.transaction(
            self._acknowledged, _run_chunk, operation_id, lease_token, after_seq, seqs, to_us(now),
            lease_seconds, chunk,
        )  # fmt: skip


@raises_workly_errors(interpret_sqlite_error)
class SqliteCallbacks:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._bookkeeping = db.bookkeeping

    async def due_callbacks(self, limit: int) -> list[DueCallback]:
        found = await self._reader.run(fetchall, _q().due_callbacks, {"limit": limit})
        return [due_callback_from_row(row, DECODERS) for row in found]

    async def clear_callbacks(self, sent: Sequence[tuple[str, int]]) -> int:
        if not sent:
            return 0
        cleared = await self._writer.transaction(
            self._bookkeeping, fetchall, _q().clear_callbacks, {"sent": to_json([list(s) for s in sent])}
        )
        return len(cleared)


def _create_replay(db: Db, operation_id: str, task_filter: TaskFilter, now_us: int) -> Operation:
    since = task_filter.created_after
    params = {
        "id": operation_id,
        "filter": to_json(task_filter.given()),
        "endpoint_id": task_filter.endpoint_id,
        "created_after": 0 if since is None else to_us(since),
        "now": now_us,
    }
    running = fetchone(db, _q().running_replay, {"endpoint_id": task_filter.endpoint_id})
    if running is not None:
        raise ReplayRunning(str(task_filter.endpoint_id), running["id"])
    found = fetchall(db, _q().insert_replay_operation, params)
    if not found:
        raise EndpointNotFound(str(task_filter.endpoint_id))
    return operation_from_row(found[0], DECODERS)


def _on_writer(
    db: Db, operation_id: str, lease_token: str, now_us: int, lease_seconds: float, chunk: int
) -> ChunkDone | None:
    """A replay's or an erase's chunk, on the writer (None: this runner no longer holds it)."""
    op = fetchone(db, _q().operation_chunk_operation, {"id": operation_id, "lease_token": lease_token})
    if op is None:
        return None
    operation = operation_from_row(op, DECODERS)
    if operation.action == "erase":
        return erase_chunk(db, op, operation, now_us, lease_seconds, chunk)
    return replay_chunk(db, op, operation, now_us, lease_seconds, chunk)


def _create_operation(
    db: Db, operation_id: str, action: Action, task_filter: TaskFilter, counted: SqliteRow, now_us: int
) -> Operation:
    params = {
        "id": operation_id,
        "action": action,
        "filter": to_json(task_filter.given()),
        "now": now_us,
        "upto_seq": counted["upto"],
        "matched": counted["matched"],
    }
    [row] = fetchall(db, _q().insert_operation, params)
    return operation_from_row(row, DECODERS)


def _read_chunk(
    db: Db, operation_id: str, lease_token: str, chunk: int
) -> tuple[int, list[int]] | Literal["replay", "erase"] | None:
    """On the reader: where the operation stands, and the seqs of its next chunk's tasks
    (its action for a replay or an erase, whose chunk reads in its own transaction)."""
    op = fetchone(db, _q().operation_chunk_operation, {"id": operation_id, "lease_token": lease_token})
    if op is None:
        return None
    if op["action"] in ("replay", "erase"):
        return cast(Literal["replay", "erase"], op["action"])
    operation = operation_from_row(op, DECODERS)
    params = {"after_seq": op["after_seq"], "upto_seq": op["upto_seq"], "chunk": chunk}
    found = fetchall(db, _q().operation_chunk, {**params, **filter_params(operation.filter, to_us)})
    return op["after_seq"], [row["seq"] for row in found]


def _run_chunk(
    db: Db, operation_id: str, lease_token: str, after_seq: int, seqs: list[int], now_us: int,
    lease_seconds: float, chunk: int,
) -> ChunkDone | None:  # fmt: skip
    """On the writer: the chunk read by _read_chunk, applied (each task's status rechecked),
    and the progress, in one transaction."""
    q = _q()
    op = fetchone(
        db, q.lock_operation, {"id": operation_id, "lease_token": lease_token, "after_seq": after_seq}
    )
    if op is None:
        return None  # finished, or taken over by another runner after our lease expired
    action = op["action"]
    params = {"seqs": to_json(seqs), "now": now_us}
    changed = 0
    if seqs and action == "retry":
        changed = len(fetchall(db, q.retry_tasks, {**params, "held_until": HELD_US}))
    elif seqs:
        changed = len(fetchall(db, q.cancel_tasks, params))
    [advanced] = fetchall(
        db,
        q.advance_operation,
        {
            "id": operation_id,
            "after_seq": seqs[-1] if seqs else after_seq,
            "changed": changed,
            "skipped": len(seqs) - changed,
            "done": len(seqs) < chunk,
            "now": now_us,
            "lease_until": now_us + int(lease_seconds * _SECOND_US),
        },
    )
    return ChunkDone(operation_from_row(advanced, DECODERS), changed)
