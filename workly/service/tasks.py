"""Tasks' use cases (docs/api.md): enqueue, read, cancel, retry, delete."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from workly.clock import Clock
from workly.errors import TaskNotFound, TooLarge
from workly.models import Attempt, Enqueued, NewTask, Task, TaskStatus
from workly.reserved_names import check_client_idempotency_key, check_client_queue
from workly.service.enqueuer import Enqueuer
from workly.service.webhooks import check_not_endpoint_queue
from workly.storage.contract import TaskStore
from workly.trace_context import parse_trace_context, stored
from workly.tracing import Tracing


class TaskUseCases:
    def __init__(
        self,
        tasks: TaskStore,
        enqueuer: Enqueuer,
        clock: Clock,
        tracing: Tracing,
        work_available: Callable[[], None],
        *,
        max_body_bytes: int,
    ) -> None:
        self._tasks = tasks
        self._enqueuer = enqueuer
        self._clock = clock
        self._tracing = tracing
        self._work_available = work_available
        self._max_body_bytes = max_body_bytes

    async def enqueue(self, tasks: Sequence[NewTask]) -> list[Enqueued]:
        """Store tasks (one request's: one, or a batch) in one transaction shared with
        concurrent requests; TooLarge (nothing stored) if a body is over the limit."""
        check_body_sizes(tasks, self._max_body_bytes)
        for task in tasks:
            check_not_endpoint_queue(task.queue)
            check_client_queue(task.queue)
            check_client_idempotency_key(task.idempotency_key)
        if not self._tracing.enabled:
            return await self._enqueuer.enqueue(tasks)
        # One request's tasks share its trace context: the span's, once it is made.
        first = tasks[0]
        attributes = {"messaging.system": "workly", "messaging.destination.name": first.queue,
                      "messaging.batch.message_count": len(tasks)}  # fmt: skip
        with self._tracing.enqueue("workly.enqueue", parse_trace_context(first.traceparent, first.tracestate),
                                   attributes) as context:  # fmt: skip
            traceparent, tracestate = stored(context)
            return await self._enqueuer.enqueue(
                [replace(task, traceparent=traceparent, tracestate=tracestate) for task in tasks]
            )

    async def get_task(self, task_id: str) -> Task:
        task = await self._tasks.get_task(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        return task

    async def list_tasks(
        self, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        """A page of tasks, newest first, and the seq to continue before (None: the last page)."""
        return await self._tasks.list_tasks(queue, status, limit, before_seq)

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        return await self._tasks.list_attempts(task_id)

    async def delete_task(self, task_id: str) -> None:
        """The task, its attempts and its callbacks; not while it is being sent (TaskInFlight)."""
        await self._tasks.delete_task(task_id)

    async def cancel_task(self, task_id: str) -> Task:
        return await self._tasks.cancel_task(task_id, self._clock.now())

    async def retry_task(self, task_id: str) -> Task:
        task = await self._tasks.retry_task(task_id, self._clock.now())
        self._work_available()
        return task


def check_body_sizes(tasks: Sequence[NewTask], limit: int) -> None:
    """TooLarge (413) for the first task whose body, as it would be sent, exceeds ``limit``."""
    for index, task in enumerate(tasks):
        size = len(task.body)
        if size > limit:
            where = "the task's" if len(tasks) == 1 else f"task {index}'s"
            raise TooLarge(f"{where} body is {size:,} bytes; at most {limit:,} (WORKLY_MAX_BODY_BYTES)")
