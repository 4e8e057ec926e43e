"""Enqueueing on SQLite: the statements of the task store's enqueue, run inside a write
transaction (the enqueue's own, or a schedule firing's)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from workly.json_text import to_json
from workly.models import ClaimedTask, Enqueued, LeaseOffer, NewTask
from workly.storage import rows
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import DECODERS, HELD_US, execute_many, fetchall, from_us, to_us
from workly.storage.task_shape import sqlite_params
from workly.storage.tasks import enqueue_results, idempotency_keys, lease_scope, with_leases

Db = sqlite3.Connection
_q = sqlite_queries
_DECODERS = DECODERS


def enqueue_on(
    db: Db, tasks: Sequence[NewTask], now_us: int, offer: LeaseOffer | None = None
) -> list[Enqueued]:
    """Store tasks (TaskStore.enqueue), inside the caller's write transaction; with an
    offer, lease what may be leased at once to the dispatcher that made it."""
    stored = _store(db, tasks, now_us)
    if offer is None:
        return stored
    ids, queues = lease_scope(stored, from_us(now_us))
    return with_leases(stored, lease_new(db, ids, queues, now_us, offer) if queues else [])


def lease_new(db: Db, ids: list[str], queues: list[str], now_us: int, offer: LeaseOffer) -> list[ClaimedTask]:
    """Eager dispatch: lease up to ``offer.slots`` of the tasks just inserted (``ids``) where
    a claim would take them now (the PostgreSQL query enqueue_tasks_leasing says when)."""
    inserted = to_json(ids)
    found = fetchall(db, _q().enqueue_tasks_leasing_room, {"ids": inserted, "queues": to_json(queues)})
    room = {row["name"]: row["free"] for row in found}
    params = {"ids": inserted, "now": now_us}
    chosen: list[int] = []
    for row in fetchall(db, _q().enqueue_tasks_leasing_candidates, params):
        if len(chosen) == offer.slots:
            break
        if room.get(row["queue"], 0) > 0:
            room[row["queue"]] -= 1
            chosen.append(row["seq"])
    if not chosen:
        return []
    lease = {"now": now_us, "lease_token": offer.lease_token, "lease_margin": offer.lease_margin}
    marked = fetchall(db, _q().claim_tasks, {**lease, "seqs": to_json(chosen)})
    by_seq = {row["seq"]: row for row in marked}
    return [rows.claimed_from_row(by_seq[seq], _DECODERS, offer.lease_token) for seq in chosen]


def _store(db: Db, tasks: Sequence[NewTask], now_us: int) -> list[Enqueued]:
    execute_many(
        db,
        _q().enqueue_tasks_ensure_queues,
        [{"queue": q, "now": now_us} for q in sorted({t.queue for t in tasks})],
    )
    keys = idempotency_keys(tasks)
    existing = fetchall(db, _q().get_tasks_by_idempotency_keys, {"keys": to_json(keys)}) if keys else []
    # Stored by an earlier try of this same request (committed, but not answered).
    stored = fetchall(db, _q().get_tasks_by_ids, {"ids": to_json([t.id for t in tasks])})
    stored_ids = {row["id"] for row in stored}
    # BEGIN IMMEDIATE excludes other writers, so checking keys first is race free.
    taken = {(row["queue"], row["idempotency_key"]) for row in existing}
    to_insert = []
    for task in tasks:
        if task.id in stored_ids:
            continue
        if task.idempotency_key is not None:
            if (task.queue, task.idempotency_key) in taken:
                continue
            taken.add((task.queue, task.idempotency_key))
        to_insert.append(task_params(task, now_us))
    execute_many(db, _q().enqueue_tasks_insert, to_insert)
    created = stored + fetchall(db, _q().get_tasks_by_ids, {"ids": to_json([p["id"] for p in to_insert])})
    return enqueue_results(
        tasks,
        {row["id"]: rows.task_from_row(row, _DECODERS) for row in created},
        {(row["queue"], row["idempotency_key"]): rows.task_from_row(row, _DECODERS) for row in existing},
    )


def task_params(task: NewTask, now_us: int) -> dict[str, Any]:
    """enqueue_tasks_insert's parameters: the task's columns (storage/task_shape.py), the
    time, and where a task held by an open breaker is stored."""
    return {**sqlite_params(task, to_us), "now": now_us, "held_until": HELD_US}
