"""Domain types shared by the storage backends, the dispatcher and the API."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from workly.errors import InvalidQueueConfig

QUEUE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
# The slowest rate limit, one dispatch per 11.6 days. A smaller (subnormal) rate overflows
# the claim's token arithmetic in PostgreSQL's float8, which would fail every claim.
MIN_RATE_LIMIT = 1e-6  # a regex: fullmatch it, or anchor it where used
_QUEUE_NAME = re.compile(QUEUE_NAME)
# stop_on entries: a status code 300-599 ("404") or a class ("4xx"); a 2xx is a success and
# a 1xx never final, so neither can stop anything.
_STOP_ON_ENTRY = re.compile(r"[345](xx|[0-9][0-9])")
MAX_STOP_ON = 100
TaskStatus = Literal["ready", "running", "succeeded", "failed", "canceled"]
TASK_STATUSES: tuple[TaskStatus, ...] = ("ready", "running", "succeeded", "failed", "canceled")
Ordering = Literal["none", "key"]
Outcome = Literal["succeeded", "retry", "failed"]
# What an attempt says about its receiver, for the circuit breaker (workly/breaker.py):
# "ok" (it answered), "fail" (a sign of trouble), "gone" (an endpoint answered 410).
BreakerEffect = Literal["ok", "fail", "gone"]
DEFAULT_STOP_ON: tuple[str, ...] = ("410",)
# What a callback task announces (its JSON "type"): workly/callbacks.py.
CallbackKind = Literal["succeeded", "failed"]


@dataclass(frozen=True, slots=True)
class QueueConfig:
    max_concurrency: int = 3
    rate_limit: float | None = None
    max_attempts: int = 10
    min_backoff: float = 1.0
    max_backoff: float = 3600.0
    timeout: float = 30.0
    ordering: Ordering = "none"
    paused: bool = False
    # whsec_ secrets signing this queue's deliveries instead of WORKLY_SIGNING_SECRET
    # (space separated, the first current). Write-only through the API.
    signing_secret: str | None = None
    # Status codes ("404") and classes ("4xx") after which a task fails without a retry
    # (408, 425 and 429 are retried whatever it says: dispatch/policy.py).
    stop_on: tuple[str, ...] = DEFAULT_STOP_ON
    deadline: float | None = None  # seconds after a task's creation (or redrive): no attempt after
    # Seconds its finished tasks are kept, whatever their outcome (None: WORKLY_RETENTION
    # and WORKLY_FAILED_RETENTION; docs/retention.md).
    retention: int | None = None


# A change to a queue's config, applied by the storage to the stored config inside the
# transaction that writes the result (so concurrent changes cannot lose one another).
QueueChange = Callable[[QueueConfig], QueueConfig]


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    config: QueueConfig
    counts: dict[TaskStatus, int]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class NewTask:
    """A task as validated by the API, before it is stored."""

    id: str
    queue: str
    url: str
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    run_at: datetime | None = None  # None: due now
    priority: int = 0
    key: str | None = None
    tenant: str | None = None
    idempotency_key: str | None = None
    max_attempts: int | None = None
    timeout: float | None = None
    event_id: str | None = None  # a delivery of this event (its webhook-id)
    endpoint_id: str | None = None  # … to this endpoint
    breaker: str | None = None  # the breaker it counts for: its endpoint id, else its origin
    # The retry policy's per-task overrides of its queue's (None: the queue's).
    stop_on: tuple[str, ...] | None = None
    deadline: float | None = None
    min_backoff: float | None = None
    max_backoff: float | None = None
    callback_url: str | None = None  # called once after it succeeded
    failure_callback_url: str | None = None  # … after it failed for good
    callback_of: str | None = None  # this task is the callback of that task
    # W3C trace context its enqueue carried: each attempt's delivery continues the trace.
    traceparent: str | None = None
    tracestate: str | None = None


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    queue: str
    status: TaskStatus
    url: str
    method: str
    headers: dict[str, str]
    body: bytes
    run_at: datetime
    priority: int
    key: str | None
    tenant: str | None
    idempotency_key: str | None
    attempts: int
    max_attempts: int  # effective: the task's override or its queue's
    timeout: float  # effective
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    event_id: str | None = None
    endpoint_id: str | None = None
    # The retry policy in effect (the task's own, else its queue's).
    stop_on: tuple[str, ...] = DEFAULT_STOP_ON
    deadline: float | None = None
    min_backoff: float = 1.0
    max_backoff: float = 3600.0
    callback_url: str | None = None
    failure_callback_url: str | None = None
    callback_of: str | None = None
    test: bool = False  # sent by POST /v1/endpoints/{id}/test
    # A running task: the process holding it (host:pid) and when its lease ends (then the
    # reaper returns it to ready, if that process is gone).
    lease_holder: str | None = None
    lease_expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Enqueued:
    task: Task  # as accepted: a task leased in its enqueue still shows ready here
    created: bool  # False: an existing task matched the idempotency key
    leased: ClaimedTask | None = None  # leased in its enqueue's transaction (LeaseOffer)


@dataclass(frozen=True, slots=True)
class ClaimedTask:
    """What the dispatcher needs to deliver one claimed task and judge its outcome."""

    seq: int
    id: str
    queue: str
    url: str
    method: str
    headers: dict[str, str]
    body: bytes
    attempt: int  # number of this attempt, 1-based, counted across retries
    max_attempts: int  # … allowed after attempt_base
    timeout: float
    min_backoff: float
    max_backoff: float
    lease_token: str
    signing_secret: str | None = None  # the queue's own, if it has one
    due_at: datetime | None = None  # the run_at it was claimed at (for the latency metric)
    event_id: str | None = None  # an event's delivery: the webhook-id is the event's
    endpoint_id: str | None = None
    breaker: str | None = None
    attempt_base: int = 0  # attempts made before its last redrive (retry): max_attempts counts after
    stop_on: tuple[str, ...] = DEFAULT_STOP_ON
    deadline_at: datetime | None = None  # no attempt may start at or after it
    capture_response: bool = False  # it has a callback: keep up to WORKLY_MAX_BODY_BYTES of the answer
    traceparent: str | None = None  # the trace its enqueue carried (W3C trace context)
    tracestate: str | None = None


@dataclass(frozen=True, slots=True)
class LeaseOffer:
    """Slots a dispatcher holds free for tasks being enqueued (eager dispatch).

    The storage leases up to ``slots`` of the tasks it inserts to it inside the enqueue's own
    transaction, where a claim would take them at once and in that order (docs/queues.md);
    the enqueuer hands them straight to the dispatcher, so they need no claim of their own.
    """

    slots: int
    lease_token: str
    lease_margin: float
    # The dispatcher's monotonic clock, read before the enqueue read the ``now`` its leases
    # count from: their local deadline counts from it (workly/dispatch/leases.py). Not stored.
    since: float


@dataclass(frozen=True, slots=True)
class Claim:
    """What one claim got, and when the next may get more despite a rate limit."""

    tasks: list[ClaimedTask]
    # Seconds until a rate-limited queue with room has its next token; None when none waits.
    rate_wait: float | None = None
    # A queue gave fewer than it could because its tenants or keys got their shares only:
    # more may be due right now.
    more: bool = False


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """The outcome of one delivery attempt, ready to be recorded."""

    task_seq: int
    lease_token: str
    attempt: int
    started_at: datetime
    finished_at: datetime
    status_code: int | None
    error: str | None
    response: bytes
    outcome: Outcome
    next_run_at: datetime | None = None  # required when outcome == "retry"
    breaker: str | None = None  # the task's breaker key
    effect: BreakerEffect | None = None  # what the attempt says about that breaker
    endpoint_id: str | None = None
    task_id: str = ""  # for what follows the record (Workly's own events)
    has_callback: bool = False  # a final outcome then has a callback to send
    sent: bool = True  # False: claimed after its deadline, not sent (no attempt is kept)


@dataclass(frozen=True, slots=True)
class RecordSummary:
    accepted: int
    stale: int  # results refused because their lease was no longer current
    released: int = 0  # held tasks freed because their breaker closed
    disabled: tuple[tuple[str, str], ...] = ()  # (endpoint id, reason) disabled by these results
    opened: int = 0  # breakers these results opened
    closed: int = 0  # … and closed


@dataclass(frozen=True, slots=True)
class Attempt:
    task_id: str
    attempt: int
    started_at: datetime
    finished_at: datetime
    status_code: int | None
    error: str | None
    duration_ms: float
    response: bytes
    stale: bool


def is_queue_name(name: str) -> bool:
    return _QUEUE_NAME.fullmatch(name) is not None


def check_queue_config(config: QueueConfig) -> QueueConfig:
    """Rules the storage relies on; the API checks the single-field bounds too, with messages
    that name the field."""
    if config.rate_limit is not None and not config.rate_limit >= MIN_RATE_LIMIT:
        raise InvalidQueueConfig(f"rate_limit must be at least {MIN_RATE_LIMIT:g} dispatches per second")
    if config.min_backoff > config.max_backoff:
        raise InvalidQueueConfig(
            f"min_backoff ({config.min_backoff:g}s) must not exceed max_backoff ({config.max_backoff:g}s)"
        )
    return config


def check_stop_on(values: Sequence[str]) -> tuple[str, ...]:
    """A stop_on list: status codes 300-599 ("404") and classes ("3xx", "4xx", "5xx"),
    without repeats. Empty is allowed: every failure is retried (410 too)."""
    if len(values) > MAX_STOP_ON:
        raise ValueError(f"stop_on lists at most {MAX_STOP_ON} entries")
    for value in values:
        if not isinstance(value, str) or not _STOP_ON_ENTRY.fullmatch(value):
            raise ValueError(
                f'stop_on entry {value!r} must be a status code from 300 to 599 ("404") or a class '
                '("3xx", "4xx", "5xx")'
            )
    return tuple(dict.fromkeys(values))
