"""Workly's exceptions, readable at a glance.

WorklyError
├── ConfigError            bad or missing configuration; the CLI exits with code 2
├── NotFoundError          a task or queue that does not exist        → 404
│   ├── TaskNotFound
│   └── QueueNotFound
├── ConflictError          the request does not fit the current state → 409
│   └── TaskStateConflict
├── InvalidQueueConfig     a queue config that contradicts itself      → 422
├── TooLarge               an input over a configured size limit       → 413
└── StorageError           the database failed or is unreachable       → 503
"""

from __future__ import annotations


class WorklyError(Exception):
    """Base of every error Workly raises on purpose."""


class ConfigError(WorklyError):
    """Configuration is missing or invalid."""


class NotFoundError(WorklyError):
    """The addressed resource does not exist."""


class TaskNotFound(NotFoundError):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id!r} does not exist")
        self.task_id = task_id


class QueueNotFound(NotFoundError):
    def __init__(self, queue: str) -> None:
        super().__init__(f"queue {queue!r} does not exist")
        self.queue = queue


class ConflictError(WorklyError):
    """The operation is not allowed in the resource's current state."""


class TaskStateConflict(ConflictError):
    def __init__(self, task_id: str, status: str, action: str, allowed: str) -> None:
        super().__init__(f"cannot {action} task {task_id!r}: it is {status}, only {allowed} tasks can be")
        self.task_id = task_id
        self.status = status


class InvalidQueueConfig(WorklyError):
    """A queue configuration whose fields contradict each other."""


class TooLarge(WorklyError):
    """An input is larger than a configured limit allows."""


class StorageError(WorklyError):
    """The database could not complete an operation."""
