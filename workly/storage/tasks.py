"""Backend-independent task rules the storage backends share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from workly.errors import EndpointGone, TaskInFlight, TaskNotFound, TaskStateConflict
from workly.models import ClaimedTask, Enqueued, NewTask, Task

_ALLOWED_FROM = {"cancel": "ready", "retry": "failed or canceled (redrive), or ready (due now)"}


IdempotencyKey = tuple[str, str]  # (queue, idempotency_key)


def enqueue_results(
    tasks: Sequence[NewTask], created: Mapping[str, Task], existing: Mapping[IdempotencyKey, Task]
) -> list[Enqueued]:
    """Pair each input with what was stored, in input order.

    An input that was not inserted matched an idempotency key: either a task stored
    before this call (``existing``) or an earlier input of the same call.
    """
    by_key: dict[IdempotencyKey, Task] = dict(existing)
    results = []
    for new in tasks:
        key = None if new.idempotency_key is None else (new.queue, new.idempotency_key)
        if new.id in created:
            task = created[new.id]
            if key is not None:
                by_key.setdefault(key, task)
            results.append(Enqueued(task, created=True))
        else:
            assert key is not None, "only idempotency matches are skipped"
            results.append(Enqueued(by_key[key], created=False))
    return results


def may_lease_new(task: NewTask, now: datetime) -> bool:
    """Whether an enqueue could lease this task to its dispatcher (eager dispatch): due now,
    of no tenant, ordering key or endpoint; the storage checks its queue and breaker."""
    return _plain_and_due(task, task.run_at is None or task.run_at <= now)


def _plain_and_due(task: NewTask | Task, due: bool) -> bool:
    return due and task.key is None and task.tenant is None and task.endpoint_id is None


def lease_scope(stored: Sequence[Enqueued], now: datetime) -> tuple[list[str], list[str]]:
    """What an enqueue's lease step reads: the ids of every task it inserted (it picks among
    them, and they do not count as tasks waiting in their queues) and the queues of those it
    may lease (none: there is no lease step)."""
    inserted = [entry.task for entry in stored if entry.created]
    queues = {
        task.queue for task in inserted if _plain_and_due(task, task.status == "ready" and task.run_at <= now)
    }
    return [task.id for task in inserted], sorted(queues)


def with_leases(stored: list[Enqueued], leased: Sequence[ClaimedTask]) -> list[Enqueued]:
    """The enqueue's answer with each leased task attached to its entry."""
    if not leased:
        return stored
    by_id = {task.id: task for task in leased}
    return [
        replace(entry, leased=by_id[entry.task.id]) if entry.created and entry.task.id in by_id else entry
        for entry in stored
    ]


def idempotency_keys(tasks: Sequence[NewTask]) -> list[IdempotencyKey]:
    return sorted({(t.queue, t.idempotency_key) for t in tasks if t.idempotency_key is not None})


def check_deleted(task_id: str, task: Task | None) -> None:
    """After a delete that found nothing to delete: why (none, or it is being sent)."""
    if task is None:
        raise TaskNotFound(task_id)
    raise TaskInFlight(task_id)


def check_transition(task_id: str, task: Task | None, changed: bool, action: str) -> Task:
    if task is None:
        raise TaskNotFound(task_id)
    retriable = task.status in ("failed", "canceled", "ready")
    if not changed and action == "retry" and retriable and task.endpoint_id is not None:
        raise EndpointGone(task_id, task.endpoint_id)  # only a retired queue refuses it then
    if not changed:
        raise TaskStateConflict(task_id, task.status, action, _ALLOWED_FROM[action])
    return task
