"""Backend-independent task rules the storage backends share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workly.errors import TaskNotFound, TaskStateConflict
from workly.models import Enqueued, NewTask, Task

_ALLOWED_FROM = {"cancel": "ready", "retry": "failed or canceled"}


def enqueue_results(
    tasks: Sequence[NewTask], created: Mapping[str, Task], existing_by_key: Mapping[str, Task]
) -> list[Enqueued]:
    """Pair each input with what was stored, in input order.

    An input that was not inserted matched an idempotency key: either a task stored
    before this call (``existing_by_key``) or an earlier input of the same call.
    """
    by_key: dict[str, Task] = dict(existing_by_key)
    results = []
    for new in tasks:
        if new.id in created:
            task = created[new.id]
            if new.idempotency_key is not None:
                by_key.setdefault(new.idempotency_key, task)
            results.append(Enqueued(task, created=True))
        else:
            assert new.idempotency_key is not None, "only idempotency matches are skipped"
            results.append(Enqueued(by_key[new.idempotency_key], created=False))
    return results


def check_transition(task_id: str, task: Task | None, changed: bool, action: str) -> Task:
    if task is None:
        raise TaskNotFound(task_id)
    if not changed:
        raise TaskStateConflict(task_id, task.status, action, _ALLOWED_FROM[action])
    return task
