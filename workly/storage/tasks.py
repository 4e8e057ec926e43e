"""Backend-independent task rules the storage backends share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workly.errors import TaskNotFound, TaskStateConflict
from workly.models import Enqueued, NewTask, Task

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


def idempotency_keys(tasks: Sequence[NewTask]) -> list[IdempotencyKey]:
    return sorted({(t.queue, t.idempotency_key) for t in tasks if t.idempotency_key is not None})


def check_transition(task_id: str, task: Task | None, changed: bool, action: str) -> Task:
    if task is None:
        raise TaskNotFound(task_id)
    if not changed:
        raise TaskStateConflict(task_id, task.status, action, _ALLOWED_FROM[action])
    return task
