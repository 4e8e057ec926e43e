"""Tasks as the API and the enqueuer see them: store, read, cancel, retry."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from workly.models import Attempt, ClaimedTask, Enqueued, LeaseOffer, NewTask, Task, TaskStatus


class TaskStore(Protocol):
    async def enqueue(
        self, tasks: Sequence[NewTask], now: datetime, offer: LeaseOffer | None = None
    ) -> list[Enqueued]:
        """Store tasks (of any queues) in one transaction, creating missing queues with defaults.

        A task whose ``idempotency_key`` matches a stored task of the same queue (or an
        earlier task of the same call) is not stored again: its entry carries the
        existing task with ``created=False``. Results are in input order; enqueue order
        (FIFO within a priority) is input order.

        With an ``offer`` (eager dispatch), up to ``offer.slots`` of the tasks it inserts are
        leased under ``offer.lease_token`` in the same transaction, as a claim would lease
        them, where a claim would take them at once and first: due now, no tenant, ordering
        key or endpoint, not held, of a queue that is not paused, has no rate limit, has room
        under max_concurrency and holds no other ready task. Their entries carry ``leased``;
        ``task`` shows each as accepted (ready, no attempts). The others stay ready for the
        claim.
        """

    async def leased_tasks(self, ids: Sequence[str], lease_token: str) -> list[ClaimedTask]:
        """The tasks among ``ids`` running under ``lease_token``, as a claim returns them: what
        an enqueue whose caller did not learn its outcome leased (eager dispatch)."""

    async def get_task(self, task_id: str) -> Task | None: ...

    async def list_tasks(
        self, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        """Tasks of a queue (of every queue when ``queue`` is None), newest first, optionally
        of one status; the int is the cursor for the next page. Raises QueueNotFound."""

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        """Attempts of a task, oldest first. Raises TaskNotFound."""

    async def delete_task(self, task_id: str) -> None:
        """Delete the task with its attempts and the callbacks made of it. Raises
        TaskNotFound, or TaskStateConflict while it runs."""

    async def cancel_task(self, task_id: str, now: datetime) -> Task:
        """ready → canceled. Raises TaskNotFound or TaskStateConflict."""

    async def retry_task(self, task_id: str, now: datetime) -> Task:
        """failed|canceled → ready, due now (held behind an open breaker), its attempts
        numbered on and a fresh budget: ``max_attempts`` and ``deadline`` count from now.
        A ready task is made due now, its budget untouched. Raises TaskNotFound, or
        TaskStateConflict (running or succeeded)."""
