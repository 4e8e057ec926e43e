"""PostgreSQL's bulk operations (OperationStore, workly/operations.py) and due callbacks
(CallbackStore, workly/callbacks.py); the queries are in sql/operations.sql."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from workly.breaker import HELD_UNTIL
from workly.callbacks import DueCallback
from workly.errors import EndpointNotFound, ReplayRunning, TenantNotFound
from workly.json_text import to_json
from workly.operations import CHUNK, Action, ChunkDone, Operation, TaskFilter
from workly.storage import rows
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.operation_rows import due_callback_from_row, filter_params, operation_from_row
from workly.storage.postgres.erasure import create_erase, erase_chunk
from workly.storage.postgres.replay import replay_chunk
from workly.storage.postgres.statements import DECODERS, Connections, execute, fetch, fetchrow


def _same(value: datetime) -> datetime:
    return value


@raises_workly_errors(interpret_postgres_error)
class PostgresOperations:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def create_operation(
        self, operation_id: str, action: Action, task_filter: TaskFilter, now: datetime
    ) -> Operation:
        if action == "erase":
            async with self._pool.acquire() as conn, conn.transaction():
                row = await create_erase(conn, self._q, operation_id, str(task_filter.tenant), now)
            if row is None:
                raise TenantNotFound(str(task_filter.tenant))
            return operation_from_row(row, DECODERS)
        if action == "replay":
            running = await fetchrow(self._pool, self._q.running_replay, endpoint_id=task_filter.endpoint_id)
            if running is not None:
                raise ReplayRunning(str(task_filter.endpoint_id), running["id"])
            row = await fetchrow(
                self._pool, self._q.insert_replay_operation, id=operation_id,
                filter=to_json(task_filter.given()), endpoint_id=task_filter.endpoint_id,
                created_after=task_filter.created_after, now=now,
            )  # fmt: skip
            if row is None:
                raise EndpointNotFound(str(task_filter.endpoint_id))
            return operation_from_row(row, DECODERS)
        row = await fetchrow(
            self._pool, self._q.insert_operation, id=operation_id, action=action,
            filter=to_json(task_filter.given()), now=now, **filter_params(task_filter, _same),
        )  # fmt: skip
        return operation_from_row(row, DECODERS)

    async def get_operation(self, operation_id: str) -> Operation | None:
        row = await fetchrow(self._pool, self._q.get_operation, id=operation_id)
        return None if row is None else operation_from_row(row, DECODERS)

    async def list_operations(self, limit: int, before_seq: int | None) -> tuple[list[Operation], int | None]:
        found = await fetch(self._pool, self._q.list_operations, **rows.page_params(limit, before_seq))
        shown, next_seq = rows.page(found, limit)
        return [operation_from_row(row, DECODERS) for row in shown], next_seq

    async def take_operation(self, now: datetime, lease_token: str, lease_seconds: float) -> Operation | None:
        row = await fetchrow(
            self._pool, self._q.take_operation, now=now, lease_token=lease_token,
            lease_until=now + timedelta(seconds=lease_seconds),
        )  # fmt: skip
        return None if row is None else operation_from_row(row, DECODERS)

    async def release_operation(self, operation_id: str, lease_token: str) -> bool:
        released = await fetch(
            self._pool, self._q.release_operation, id=operation_id, lease_token=lease_token
        )
        return bool(released)

    async def run_operation_chunk(
        self, operation_id: str, lease_token: str, now: datetime, lease_seconds: float, chunk: int = CHUNK
    ) -> ChunkDone | None:
        q = self._q
        async with self._pool.acquire() as conn, conn.transaction():
            op = await fetchrow(conn, q.lock_operation, id=operation_id, lease_token=lease_token)
            if op is None:
                return None  # finished, or taken over by another runner after our lease expired
            operation = operation_from_row(op, DECODERS)
            if operation.action == "replay":
                return await replay_chunk(conn, q, op, operation, now, lease_seconds, chunk)
            if operation.action == "erase":
                return await erase_chunk(conn, q, op, operation, now, lease_seconds, chunk)
            found = await fetch(
                conn, q.operation_chunk, after_seq=op["after_seq"], upto_seq=op["upto_seq"], chunk=chunk,
                **filter_params(operation.filter, _same),
            )  # fmt: skip
            seqs = [row["seq"] for row in found]
            changed = 0
            if seqs and operation.action == "retry":
                await execute(conn, q.lock_queues_named, names=sorted({row["queue"] for row in found}))
                changed = len(await fetch(conn, q.retry_tasks, seqs=seqs, now=now, held_until=HELD_UNTIL))
            elif seqs:
                changed = len(await fetch(conn, q.cancel_tasks, seqs=seqs, now=now))
            advanced = await fetchrow(
                conn, q.advance_operation, id=operation_id, after_seq=seqs[-1] if seqs else op["after_seq"],
                changed=changed, skipped=len(seqs) - changed, done=len(seqs) < chunk, now=now,
                lease_until=now + timedelta(seconds=lease_seconds),
            )  # fmt: skip
        return ChunkDone(operation_from_row(advanced, DECODERS), changed)


@raises_workly_errors(interpret_postgres_error)
class PostgresCallbacks:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def due_callbacks(self, limit: int) -> list[DueCallback]:
        found = await fetch(self._pool, self._q.due_callbacks, limit=limit)
        return [due_callback_from_row(row, DECODERS) for row in found]

    async def clear_callbacks(self, sent: Sequence[tuple[str, int]]) -> int:
        if not sent:
            return 0
        cleared = await fetch(
            self._pool, self._q.clear_callbacks, ids=[task_id for task_id, _ in sent],
            callback_seqs=[seq for _, seq in sent],
        )  # fmt: skip
        return len(cleared)
