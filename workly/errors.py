"""Workly's exceptions, readable at a glance.

WorklyError
├── ConfigError            bad or missing configuration; the CLI exits with code 2
├── NotFoundError          a task or queue that does not exist        → 404
│   ├── TaskNotFound
│   ├── QueueNotFound
│   ├── EndpointNotFound
│   ├── EventNotFound
│   ├── OperationNotFound
│   ├── ScheduleNotFound
│   ├── TenantNotFound
│   ├── ApiKeyNotFound
│   └── EventTypeNotFound
├── ConflictError          the request does not fit the current state → 409
│   ├── TaskStateConflict
│   ├── QueueOfEndpoint    a queue that belongs to an endpoint is changed through it
│   ├── TooManyEndpoints   a tenant's max_endpoints is reached
│   ├── EndpointInUse      an endpoint with deliveries is given to another tenant
│   ├── EndpointDisabled   a test event for a disabled endpoint
│   ├── ReplayRunning      a replay of an endpoint that is being replayed
│   └── StorageConflict    the database refused a write that collides (also a StorageError)
├── InvalidQueueConfig     a queue config that contradicts itself      → 422
│   └── InvalidEndpoint    … or an endpoint (a tenant subscribed to workly.*)
├── InvalidOperation       a bulk operation that names no filter      → 422
├── InvalidSchedule        a schedule whose fields contradict each other → 422
├── InvalidEventType       a schema or example that cannot be used, a type strict mode refuses → 422
├── InvalidPayload         a payload its type's schema rejects (JSON Pointer errors) → 422
├── TooLarge               an input over a configured size limit       → 413
├── PermissionDenied       the caller's role lacks what the call needs  → 403
└── StorageError           the database failed an operation            → 500
    └── StorageUnavailable the database is down, restarting, unreachable or too slow → 503
        ├── StorageFull        a disk the database writes to is full: the write was rolled back
        ├── StorageContention  a deadlock or serialization conflict aborted the transaction
        └── ServiceNotRunning  the service has not started, or is stopping

The storage backends raise only these (workly/storage/interpret.py turns each driver's
errors into them): nothing above storage knows asyncpg or sqlite3.
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


class EndpointNotFound(NotFoundError):
    def __init__(self, endpoint_id: str) -> None:
        super().__init__(f"endpoint {endpoint_id!r} does not exist")
        self.endpoint_id = endpoint_id


class EventNotFound(NotFoundError):
    def __init__(self, event_id: str) -> None:
        super().__init__(f"event {event_id!r} does not exist")
        self.event_id = event_id


class OperationNotFound(NotFoundError):
    def __init__(self, operation_id: str) -> None:
        super().__init__(f"operation {operation_id!r} does not exist")
        self.operation_id = operation_id


class ScheduleNotFound(NotFoundError):
    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id!r} does not exist")
        self.schedule_id = schedule_id


class TenantNotFound(NotFoundError):
    def __init__(self, tenant: str) -> None:
        super().__init__(f"tenant {tenant!r} does not exist")
        self.tenant = tenant


class EventTypeNotFound(NotFoundError):
    def __init__(self, event_type: str) -> None:
        super().__init__(f"event type {event_type!r} is not in the catalogue")
        self.event_type = event_type


class ApiKeyNotFound(NotFoundError):
    def __init__(self, key_id: str) -> None:
        super().__init__(f"API key {key_id!r} does not exist")
        self.key_id = key_id


class OutOfScope(NotFoundError):
    """What a tenant-scoped key asks for that is not its tenant's: answered as if it did not
    exist (404), so that nothing can be learnt by probing names."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} does not exist")


class NoPublicKey(NotFoundError):
    def __init__(self, owner: str) -> None:
        super().__init__(
            f"{owner} signs with HMAC only (v1): give it a whsk_ ed25519 key in signing_secret "
            "for v1a signatures and a public key"
        )


class ConflictError(WorklyError):
    """The operation is not allowed in the resource's current state."""


class TaskStateConflict(ConflictError):
    def __init__(self, task_id: str, status: str, action: str, allowed: str) -> None:
        super().__init__(f"cannot {action} task {task_id!r}: it is {status}, only {allowed} tasks can be")
        self.task_id = task_id
        self.status = status


class QueueOfEndpoint(ConflictError):
    def __init__(self, queue: str) -> None:
        super().__init__(
            f"queue names starting with 'ep_' are reserved for endpoints: {queue!r} is changed "
            f"through /v1/endpoints/{queue} (if that endpoint exists) and takes no tasks but its "
            "events' deliveries"
        )
        self.queue = queue


class TooManyEndpoints(ConflictError):
    def __init__(self, tenant: str, limit: int) -> None:
        super().__init__(
            f"tenant {tenant!r} has its max_endpoints ({limit}) already: delete one, or raise the "
            f"limit with PATCH /v1/tenants/{tenant}"
        )
        self.tenant = tenant
        self.limit = limit


class EndpointInUse(ConflictError):
    def __init__(self, endpoint_id: str) -> None:
        super().__init__(
            f"endpoint {endpoint_id!r} has deliveries: its tenant cannot change (they are its tenant's "
            "events'); create an endpoint for the other tenant instead"
        )
        self.endpoint_id = endpoint_id


class EndpointDisabled(ConflictError):
    def __init__(self, endpoint_id: str) -> None:
        super().__init__(
            f"endpoint {endpoint_id!r} is disabled: a test event would wait there; enable it first "
            f"(POST /v1/endpoints/{endpoint_id}/enable)"
        )
        self.endpoint_id = endpoint_id


class ReplayRunning(ConflictError):
    def __init__(self, endpoint_id: str, operation_id: str) -> None:
        super().__init__(
            f"endpoint {endpoint_id!r} is being replayed already ({operation_id}): follow it with "
            f"GET /v1/operations/{operation_id}, and replay again once it has finished"
        )
        self.operation_id = operation_id


class EndpointGone(ConflictError):
    def __init__(self, task_id: str, endpoint_id: str) -> None:
        super().__init__(
            f"cannot retry task {task_id!r}: its endpoint {endpoint_id!r} was deleted (its finished "
            "deliveries are kept until retention, and never sent again)"
        )
        self.task_id = task_id


class TaskInFlight(ConflictError):
    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"cannot delete task {task_id!r} while it is being sent; try again once it has finished"
        )
        self.task_id = task_id


class DeliveryInFlight(ConflictError):
    def __init__(self, event_id: str, task_id: str) -> None:
        super().__init__(
            f"cannot delete event {event_id!r} while its delivery {task_id!r} is being sent; try again "
            "once it has finished"
        )
        self.event_id = event_id
        self.task_id = task_id


class InvalidQueueConfig(WorklyError):
    """A queue configuration whose fields contradict each other."""


class InvalidEndpoint(InvalidQueueConfig):
    """An endpoint whose fields contradict each other (its delivery settings are a queue's)."""


class InvalidOperation(WorklyError):
    """A bulk operation that cannot be run as asked (no filter, an unknown action)."""


class InvalidSchedule(WorklyError):
    """A schedule that cannot be stored as asked (a queue for an event, a cron or time zone
    a change makes invalid)."""


class InvalidEventType(WorklyError):
    """An event type's schema or examples that cannot be used, or a type that is not in the
    catalogue where WORKLY_EVENT_TYPES=strict wants one. ``errors``: (JSON Pointer, message)."""

    def __init__(self, message: str, errors: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


class InvalidPayload(WorklyError):
    """A published payload that its event type's schema rejects; ``errors`` say where, as
    (JSON Pointer into the payload, message)."""

    def __init__(self, event_type: str, errors: list[tuple[str, str]], more: bool = False) -> None:
        """``more``: there were more errors than ``errors``."""
        shown = "; ".join(f"{path or '(the payload)'}: {message}" for path, message in errors[:3])
        more_text = " (and more)" if more or len(errors) > 3 else ""
        super().__init__(f"the payload does not match the schema of {event_type!r}: {shown}{more_text}")
        self.errors = errors


class ReservedName(WorklyError):
    """A name Workly keeps for itself, given by a client: a queue ``workly.*`` (its callbacks'),
    an idempotency key ``schedule:…`` (its schedules' firings, which a client's task or event
    holding the key would silently replace)."""


class TooLarge(WorklyError):
    """An input is larger than a configured limit allows."""


class PermissionDenied(WorklyError):
    """The caller's role does not allow the call, or it names a tenant its key is not
    scoped to (403)."""

    def __init__(self, role: str, lacks: str, action: str, detail: str | None = None) -> None:
        super().__init__(
            detail or f"a key with the role {role!r} cannot {action}: it lacks the {lacks!r} permission"
        )
        self.role = role
        self.lacks = lacks
        self.action = action


class StorageError(WorklyError):
    """The database could not complete an operation."""


class StorageUnavailable(StorageError):
    """The database cannot be reached or cannot answer in time: retrying later may work."""


class StorageFull(StorageUnavailable):
    """A disk the database writes to (its files, or its temporary files) is full: the write
    was rolled back, and the same write can succeed once space is freed."""


class StorageContention(StorageUnavailable):
    """PostgreSQL aborted the transaction to break a deadlock or a serialization conflict with
    another one: it rolled back whole, and the same call may succeed at once. The backend
    retries its own transactions a few times before this reaches a caller."""


class StorageConflict(StorageError, ConflictError):
    """The database refused a write that collides with stored data (a constraint), most
    likely a concurrent change (a queue deleted while tasks were enqueued to it). Its
    message is for clients; the driver's own words stay in ``__cause__`` and the log."""

    def __init__(self) -> None:
        super().__init__(
            "a concurrent change collided with this one (such as its queue being deleted); retry"
        )


class ServiceNotRunning(StorageUnavailable):
    """A call reached the service before it started or after it began to stop."""

    def __init__(self) -> None:
        super().__init__("the service is not running (starting up or shutting down): retry")
