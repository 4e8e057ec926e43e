"""Tasks' and queues' use cases as one principal may call them. Queues and plain tasks
belong to no tenant; a tenant-scoped key sees only the deliveries of its own endpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from workly.delivery_stats import MinuteStats, Scope
from workly.errors import NotFoundError, TaskNotFound
from workly.models import Attempt, Enqueued, NewTask, Queue, QueueConfig, Task, TaskStatus
from workly.service.access.decisions import Access
from workly.service.queues import QueueUseCases
from workly.service.tasks import TaskUseCases
from workly.service.webhooks import WebhookUseCases


class ScopedTasks:
    def __init__(self, tasks: TaskUseCases, webhooks: WebhookUseCases, access: Access) -> None:
        self._tasks = tasks
        self._webhooks = webhooks
        self._access = access

    async def _owner(self, task_id: str, changes: bool = False) -> str | None:
        """The tenant of the task, once the principal is seen to see it: a delivery belongs to
        its event's tenant, a plain task to none (so a tenant-scoped principal finds only its
        events' deliveries; else TaskNotFound, as for none). Read for a tenant-scoped
        principal, and for a change (its audit entry names the tenant)."""
        if self._access.tenant is None and not changes:
            return None
        task = await self._tasks.get_task(task_id)
        owner = None
        if task.event_id is not None and task.endpoint_id is not None:
            try:
                owner = (await self._webhooks.get_event(task.event_id)).tenant
            except NotFoundError:  # pruned meanwhile: then so is the task, or nearly
                owner = None
        self._access.see(owner, TaskNotFound(task_id))
        return owner

    async def enqueue(self, tasks: Sequence[NewTask]) -> list[Enqueued]:
        self._access.untenanted(f"queue {tasks[0].queue!r}")
        self._access.act("task.enqueue", "publish", tasks[0].queue)
        return await self._tasks.enqueue(tasks)

    async def get_task(self, task_id: str) -> Task:
        tenant = await self._owner(task_id)
        self._access.act("task.read", "read_messages", task_id, tenant)
        return await self._tasks.get_task(task_id)

    async def list_tasks(
        self, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        self._access.untenanted("the task list" if queue is None else f"queue {queue!r}")
        self._access.act("task.list", "read_messages", queue)
        return await self._tasks.list_tasks(queue, status, limit, before_seq)

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        tenant = await self._owner(task_id)
        self._access.act("task.attempts", "read_messages", task_id, tenant)
        return await self._tasks.list_attempts(task_id)

    async def cancel_task(self, task_id: str) -> Task:
        tenant = await self._owner(task_id, changes=True)
        self._access.act("task.cancel", "write", task_id, tenant)
        return await self._tasks.cancel_task(task_id)

    async def retry_task(self, task_id: str) -> Task:
        tenant = await self._owner(task_id, changes=True)
        self._access.act("task.retry", "write", task_id, tenant)
        return await self._tasks.retry_task(task_id)

    async def delete_task(self, task_id: str) -> None:
        tenant = await self._owner(task_id, changes=True)
        self._access.act("task.delete", "write", task_id, tenant)
        await self._tasks.delete_task(task_id)


def _config_changes(config: QueueConfig) -> dict[str, Any]:
    return {k: v for k, v in asdict(config).items() if v is not None}


class ScopedQueues:
    def __init__(self, queues: QueueUseCases, webhooks: WebhookUseCases, access: Access) -> None:
        self._queues = queues
        self._webhooks = webhooks
        self._access = access

    def _act(
        self, action: str, permission: Any, name: str | None, changes: Mapping[str, Any] | None = None
    ) -> None:
        self._access.untenanted("queues" if name is None else f"queue {name!r}")
        self._access.act(action, permission, name, changes=changes)

    async def get_queue(self, name: str) -> Queue:
        self._act("queue.read", "read", name)
        return await self._queues.get_queue(name)

    async def queue_public_keys(self, name: str) -> list[str]:
        self._act("queue.public_key", "read", name)
        return await self._queues.queue_public_keys(name)

    async def list_queues(self) -> list[Queue]:
        self._act("queue.list", "read", None)
        return await self._queues.list_queues()

    async def delivery_history(self, scope: Scope, name: str, minutes: int = 60) -> list[MinuteStats]:
        """A queue's chart, or an endpoint's (which its tenant's keys see)."""
        if scope == "endpoint" and self._access.tenant is not None:
            endpoint = await self._webhooks.get_endpoint(name)
            self._access.see(endpoint.spec.tenant, NotFoundError(f"endpoint {name!r} does not exist"))
            self._access.act("endpoint.history", "read", name, endpoint.spec.tenant)
        else:
            self._act("queue.history", "read", name)
        return await self._queues.delivery_history(scope, name, minutes)

    async def delivered_in_last(self, window: timedelta) -> dict[str, int]:
        self._act("queue.list", "read", None)
        return await self._queues.delivered_in_last(window)

    async def put_queue(self, name: str, config: QueueConfig) -> tuple[Queue, bool]:
        self._act("queue.put", "write", name, _config_changes(config))
        return await self._queues.put_queue(name, config)

    async def update_queue(self, name: str, changes: Mapping[str, Any]) -> Queue:
        self._act("queue.update", "write", name, changes)
        return await self._queues.update_queue(name, changes)

    async def pause_queue(self, name: str) -> Queue:
        self._act("queue.pause", "write", name)
        return await self._queues.pause_queue(name)

    async def resume_queue(self, name: str) -> Queue:
        self._act("queue.resume", "write", name)
        return await self._queues.resume_queue(name)

    async def delete_queue(self, name: str) -> None:
        self._act("queue.delete", "write", name)
        await self._queues.delete_queue(name)

    async def purge_queue(self, name: str) -> int:
        self._act("queue.purge", "write", name)
        return await self._queues.purge_queue(name)
