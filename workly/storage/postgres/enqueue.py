"""PostgreSQL's enqueue: one statement that creates missing queues and inserts the tasks in
order (sql/core.sql enqueue_tasks); with a LeaseOffer, one that also inserts leased what a
claim would take at once (enqueue_tasks_leasing, eager dispatch).

``enqueue_on`` runs on a connection it is given: the task store's enqueue in a transaction
of its own, schedules' firings inside theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from workly.breaker import HELD_UNTIL
from workly.models import ClaimedTask, Enqueued, LeaseOffer, NewTask
from workly.storage import rows
from workly.storage.postgres.statements import DECODERS as _DECODERS
from workly.storage.postgres.statements import Connection
from workly.storage.postgres.statements import fetch as _fetch
from workly.storage.postgres.statements import fetchrow as _fetchrow
from workly.storage.queries import PostgresQueries
from workly.storage.task_shape import postgres_arrays
from workly.storage.tasks import enqueue_results, idempotency_keys, may_lease_new, with_leases


async def enqueue_on(
    conn: Connection,
    q: PostgresQueries,
    tasks: Sequence[NewTask],
    now: datetime,
    offer: LeaseOffer | None = None,
) -> list[Enqueued]:
    """The enqueue's statements on ``conn`` (in the caller's transaction, if it has one)."""
    lease = _lease_params(tasks, now, offer)
    if offer is None or lease is None:
        created = await _fetch(conn, q.enqueue_tasks, now=now, **task_columns(tasks))
        leased = []
    else:
        created = await _fetch(conn, q.enqueue_tasks_leasing, now=now, **task_columns(tasks), **lease)
        leased = _leased(created, offer.lease_token)
    # Tasks of a queue another transaction created meanwhile: read as stored.
    for index, row in enumerate(created):
        if row["max_attempts"] is None:
            reread = await _fetchrow(conn, q.get_task, id=row["id"])
            assert reread is not None, "inserted in this statement"
            created[index] = reread
    existing = []
    if len(created) < len(tasks):
        # Stored by an earlier try of this same request (committed, not answered).
        inserted = {row["id"] for row in created}
        skipped = [t.id for t in tasks if t.id not in inserted]
        created.extend(await _fetch(conn, q.get_tasks_by_ids, ids=skipped))
        keys = idempotency_keys(tasks)
        existing = await _fetch(
            conn,
            q.get_tasks_by_idempotency_keys,
            queues=[queue for queue, _ in keys],
            keys=[key for _, key in keys],
        )
    stored = enqueue_results(
        tasks,
        {row["id"]: rows.task_from_row(row, _DECODERS) for row in created},
        {(row["queue"], row["idempotency_key"]): rows.task_from_row(row, _DECODERS) for row in existing},
    )
    return with_leases(stored, leased)


def _lease_params(tasks: Sequence[NewTask], now: datetime, offer: LeaseOffer | None) -> dict[str, Any] | None:
    """enqueue_tasks_leasing's eager dispatch parameters; None: nothing to lease (no offer,
    no task a claim would take at once) or a batch with an idempotency key (the statement
    says why)."""
    if offer is None or any(t.idempotency_key is not None for t in tasks):
        return None
    queues = sorted({t.queue for t in tasks if may_lease_new(t, now)})
    if not queues:
        return None
    return {
        "lease_queues": queues, "limit": offer.slots, "lease_token": offer.lease_token,
        "lease_margin": offer.lease_margin,
    }  # fmt: skip


def _leased(created: list[asyncpg.Record], lease_token: str) -> list[ClaimedTask]:
    """The tasks enqueue_tasks_leasing inserted leased, in the order a claim takes them."""
    found = sorted((row for row in created if row["leased"]), key=lambda row: (-row["priority"], row["seq"]))
    return [rows.claimed_from_row(row, _DECODERS, lease_token) for row in found]


def task_columns(tasks: Sequence[NewTask]) -> dict[str, Any]:
    """The tasks as one array per column (storage/task_shape.py): enqueue_tasks unnests them
    in one statement; a task held by an open breaker is stored at ``held_until``."""
    return {**postgres_arrays(tasks), "held_until": HELD_UNTIL}
