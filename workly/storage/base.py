"""The storage contract every backend implements.

Methods are domain operations, not query execution: nothing above storage sees SQL or a
database driver. Every method raises only Workly's errors (workly/errors.py: not found,
conflict, StorageUnavailable, StorageError; workly/storage/interpret.py). Every method that
reads or writes time takes ``now`` from the caller, so the core runs on an injectable clock
and tests never sleep. Rules that are not about storing (a queue config's consistency, the
body size) are the service's (workly/service); the storage applies what it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Protocol

from workly.breaker import BreakerRules
from workly.callbacks import DueCallback
from workly.delivery_stats import MinuteStats, Scope
from workly.models import (
    Attempt,
    AttemptResult,
    Claim,
    ClaimedTask,
    Enqueued,
    LeaseOffer,
    NewTask,
    Queue,
    QueueChange,
    QueueConfig,
    RecordSummary,
    Task,
    TaskStatus,
)
from workly.operations import CHUNK, Action, ChunkDone, Operation, TaskFilter
from workly.schedules import Fired, Firing, Schedule, ScheduleSpec
from workly.webhooks import Endpoint, EndpointSpec, Event, NewEvent, Published

# A change to an endpoint, applied to the stored spec inside the writing transaction.
EndpointChange = Callable[[EndpointSpec], EndpointSpec]
# A change to a schedule: its new spec and next run, from the stored schedule, decided
# inside the writing transaction.
ScheduleChange = Callable[[Schedule], tuple[ScheduleSpec, datetime | None]]
# What a firing of a schedule makes and where the schedule goes next (schedules.plan_firing);
# None: leave that schedule as it is (this process cannot plan it).
FiringPlan = Callable[[Schedule], Firing | None]


class Storage(Protocol):
    dialect: str

    async def migrate(self) -> list[int]:
        """Apply pending migrations; return the versions applied."""

    async def schema_version(self) -> int: ...

    async def ping(self) -> None:
        """Raise if the database cannot answer a trivial query."""

    async def close(self) -> None: ...

    async def check_install_location(self) -> None:
        """ConfigError when migrate() would refuse the database because Workly's tables are
        elsewhere in it (PostgreSQL with no schema configured and an install in another
        schema). Reads only."""

    async def database_now(self) -> datetime | None:
        """The database server's clock (PostgreSQL), to compare with this host's; None when
        the database is a file of this host (SQLite)."""
        return None

    # --- housekeeping -----------------------------------------------------------------
    async def needs_vacuum(self) -> bool:
        """Whether Workly should vacuum its tables itself (PostgreSQL with autovacuum off)."""

    async def vacuum(self) -> None:
        """Remove dead row versions from the hot tables (PostgreSQL VACUUM; SQLite: nothing)."""

    async def rebuild_bloated_indexes(self) -> list[str]:
        """Rebuild the indexes of the churning tables that retention has left much larger
        than their entries need, in one process at a time; their names (PostgreSQL, see
        postgres_indexes.py; SQLite: none, its B-trees merge pages that deletes leave
        underfull)."""

    # --- wake-ups across processes -------------------------------------------------
    async def announce_work(self) -> None:
        """Tell other processes that work may be claimable (PostgreSQL: NOTIFY; SQLite: nothing).

        Called after the change committed (an enqueue, a retry, a resumed or changed
        queue), never inside its transaction.
        """

    async def listen_for_work(
        self, on_work: Callable[[], None], sql_poll_interval: float | None = None
    ) -> None:
        """Call ``on_work`` whenever another process announces work, until ``close``.

        PostgreSQL keeps one dedicated LISTEN connection outside the pool and reconnects
        when it is lost; it returns once that connection is up (or after a few seconds of
        trying). With ``sql_poll_interval`` it also calls ``on_work`` within that many
        seconds of the commit of a task the SQL functions enqueued (docs/sql-enqueue.md).
        SQLite is single-process and never calls it.
        """

    async def set_sql_limits(self, max_body_bytes: int) -> None:
        """PostgreSQL: the largest body the SQL functions (enqueue_task, publish_event)
        accept, as this process's WORKLY_MAX_BODY_BYTES. SQLite has no SQL functions."""

    # --- tasks -------------------------------------------------------------------
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

    async def cancel_task(self, task_id: str, now: datetime) -> Task:
        """ready → canceled. Raises TaskNotFound or TaskStateConflict."""

    async def retry_task(self, task_id: str, now: datetime) -> Task:
        """failed|canceled → ready, due now (held behind an open breaker), its attempts
        numbered on and a fresh budget: ``max_attempts`` and ``deadline`` count from now.
        A ready task is made due now, its budget untouched. Raises TaskNotFound, or
        TaskStateConflict (running or succeeded)."""

    # --- dispatch ----------------------------------------------------------------
    async def claim_tasks(self, limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        """Claim up to ``limit`` due tasks from unpaused queues, as one atomic step.

        Every queue rule holds across all processes sharing the database (docs/queues.md):
        no queue gets more tasks in flight than its ``max_concurrency``, or more per
        second than its ``rate_limit`` (bursts of a tenth of a second's worth, at least
        one); in an ``ordering: key`` queue a key's oldest unfinished task is the only one
        claimable, and only while none of the key runs; within a queue, tasks are taken in
        rounds over groups (untenanted tasks, each tenant least recently served first, each
        key), each group's in priority (high first), run_at, enqueue order; queues are
        interleaved round by round. Claimed tasks become ``running`` with ``attempts``
        incremented and a lease until now + timeout + lease_margin under ``lease_token``.
        """

    async def record_results(
        self, results: Sequence[AttemptResult], now: datetime, rules: BreakerRules = BreakerRules()
    ) -> RecordSummary:
        """Record attempt outcomes in one transaction.

        A result whose lease token no longer matches a running task is refused (stale):
        its attempt is still kept, marked stale, and the task is left as it is.

        Each accepted result's ``effect`` moves its breaker (workly/breaker.py, ``rules``):
        a breaker that opens holds its receiver's ready tasks (and any enqueued while it is
        open) without spending attempts; one that closes frees them (``released``). An
        endpoint that answered 410, or has failed without a success for
        ``rules.disable_after``, is disabled (``disabled``).
        """

    async def extend_leases(
        self, leases: Sequence[tuple[int, str]], now: datetime, lease_margin: float
    ) -> set[tuple[int, str]]:
        """The heartbeat: for each (task seq, lease token) still held, move the lease's expiry
        to now + the task's timeout + ``lease_margin``, in one statement. Returns the leases
        it extended: the dispatcher renews its own deadline for those only (a seq alone could
        name a task this process claimed again under a new lease after losing the old one)."""

    async def prune_succeeded(self, before: datetime, limit: int = 1000) -> int:
        """Delete up to ``limit`` succeeded tasks (with their attempts) last updated before
        ``before``, oldest first. Failed and canceled tasks stay. Returns how many."""

    async def recount_running(self) -> int:
        """Set each queue's count of deliveries in flight from the tasks themselves, where a
        backend keeps such a counter; return how many queues were corrected."""

    async def reap_expired(self, now: datetime, limit: int = 1000) -> int:
        """Return running tasks whose lease expired before ``now`` to ready (due now), or
        fail them when that attempt was their last; record each as an attempt ending in
        "lease expired". Safe to run in several processes at once. Returns how many."""

    async def release_probes(self, now: datetime) -> int:
        """For each open breaker whose cool-down is over and that has no probe out, make one
        held task (the first by priority, then due time) due now as its probe. Safe in
        several processes at once. Returns how many were released."""

    # --- queues ------------------------------------------------------------------
    async def get_queue(self, name: str) -> Queue | None: ...

    async def list_queues(self) -> list[Queue]: ...

    async def put_queue(self, name: str, config: QueueConfig, now: datetime) -> tuple[Queue, bool]:
        """Create or replace a queue's config; the bool is True when it was created."""

    async def update_queue(self, name: str, change: QueueChange, now: datetime) -> Queue:
        """Replace the config with ``change(stored config)``, atomically: the queue row is
        locked from the read to the write. Raises QueueNotFound, or what ``change`` raises."""

    async def delete_queue(self, name: str) -> None:
        """Delete a queue with its tasks and their attempts. Raises QueueNotFound."""

    async def purge_queue(self, name: str) -> int:
        """Delete a queue's ready tasks; return how many. Raises QueueNotFound."""

    # --- endpoints (workly/webhooks.py) ---------------------------------------------
    async def create_endpoint(self, endpoint_id: str, spec: EndpointSpec, now: datetime) -> Endpoint:
        """Store an endpoint with its queue (named ``endpoint_id``), enabled and healthy."""

    async def get_endpoint(self, endpoint_id: str) -> Endpoint | None: ...

    async def list_endpoints(
        self, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Endpoint], int | None]:
        """Newest first; only ``tenant``'s when given; the int continues the list."""

    async def update_endpoint(self, endpoint_id: str, change: EndpointChange, now: datetime) -> Endpoint:
        """Replace the spec with ``change(stored spec)`` atomically; a new URL also applies to
        its ready deliveries. Raises EndpointNotFound, or what ``change`` raises."""

    async def delete_endpoint(self, endpoint_id: str) -> None:
        """Delete the endpoint, its queue and its tasks. Raises EndpointNotFound."""

    async def set_endpoint_enabled(
        self, endpoint_id: str, enabled: bool, reason: str | None, now: datetime
    ) -> tuple[Endpoint, bool]:
        """Enable (its breaker reset, its held tasks freed) or disable (its pending tasks
        held, ``reason`` kept). The bool: whether it changed. Raises EndpointNotFound."""

    async def recover_endpoint(self, endpoint_id: str, since: datetime, now: datetime) -> int:
        """Its tasks that failed at or after ``since`` become ready, due now, with a fresh
        attempt budget; how many. Raises EndpointNotFound."""

    # --- events ------------------------------------------------------------------
    async def publish(
        self, event: NewEvent, now: datetime, new_task_id: Callable[[], str], only_if_delivered: bool = False
    ) -> Published | None:
        """Store the event and one delivery task (ids from ``new_task_id``) per enabled
        endpoint of its tenant whose event_types match, in one transaction. An event whose
        idempotency key (per tenant) is taken stores nothing: the original comes back with
        ``created=False``. ``only_if_delivered``: an event no endpoint takes is not stored
        (None)."""

    async def get_event(self, event_id: str) -> Event | None: ...

    async def list_events(
        self, event_type: str | None, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Event], int | None]:
        """Newest first, filtered by type and tenant when given."""

    async def prune_events(self, before: datetime, limit: int = 1000) -> int:
        """Delete up to ``limit`` events published before ``before`` none of whose deliveries
        is stored any more, oldest first. Returns how many."""

    async def count_endpoints_by_state(self) -> dict[str, int]:
        """How many endpoints are in each health state (healthy, failing, open, disabled)."""

    # --- bulk operations (workly/operations.py) ------------------------------------------
    async def create_operation(
        self, operation_id: str, action: Action, task_filter: TaskFilter, now: datetime
    ) -> Operation:
        """Store a running operation covering the tasks stored now that ``task_filter``
        matches (``matched`` counts them); nothing is changed yet."""

    async def get_operation(self, operation_id: str) -> Operation | None: ...

    async def list_operations(self, limit: int, before_seq: int | None) -> tuple[list[Operation], int | None]:
        """Newest first; the int continues the list."""

    async def take_operation(self, now: datetime, lease_token: str, lease_seconds: float) -> Operation | None:
        """Lease the oldest running operation that no runner holds (or whose runner's lease
        expired) to ``lease_token`` for ``lease_seconds``; None when there is none."""

    async def release_operation(self, operation_id: str, lease_token: str) -> bool:
        """Give back an operation ``lease_token`` holds, for any runner to take at once;
        whether it held it."""

    async def run_operation_chunk(
        self, operation_id: str, lease_token: str, now: datetime, lease_seconds: float, chunk: int = CHUNK
    ) -> ChunkDone | None:
        """Apply the operation to its next ``chunk`` matching tasks and record the progress
        in one transaction, renewing the lease; the chunk that finds fewer finishes it.
        None if ``lease_token`` no longer holds it (finished, or taken over)."""

    # --- callbacks (workly/callbacks.py) --------------------------------------------------
    async def due_callbacks(self, limit: int) -> list[DueCallback]:
        """Up to ``limit`` finished tasks whose callback is still to be sent, oldest first,
        each with its last attempt (its response as kept: up to WORKLY_MAX_BODY_BYTES)."""

    async def clear_callbacks(self, sent: Sequence[tuple[str, int]]) -> int:
        """Mark callbacks sent, for each (task id, callback_seq) whose task has not finished
        again since; how many."""

    # --- schedules (workly/schedules.py) ----------------------------------------------------
    async def create_schedule(
        self, schedule_id: str, spec: ScheduleSpec, next_run_at: datetime | None, now: datetime
    ) -> Schedule: ...

    async def get_schedule(self, schedule_id: str) -> Schedule | None: ...

    async def list_schedules(self, limit: int, before_seq: int | None) -> tuple[list[Schedule], int | None]:
        """Newest first; the int continues the list."""

    async def update_schedule(self, schedule_id: str, change: ScheduleChange, now: datetime) -> Schedule:
        """Replace the spec and next run with ``change(stored schedule)``, atomically against
        firings and other changes. Raises ScheduleNotFound, or what ``change`` raises."""

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete the schedule; the tasks and events it made stay. Raises ScheduleNotFound."""

    async def fire_due_schedules(
        self,
        now: datetime,
        limit: int,
        plan: FiringPlan,
        new_task_id: Callable[[], str],
        skip: Collection[str] = (),
    ) -> list[Fired]:
        """For up to ``limit`` schedules whose next run is at or before ``now`` (most overdue
        first), those named in ``skip`` left out: store what ``plan(schedule)`` makes (a task
        through enqueue, an event through publish, whose deliveries take ids from
        ``new_task_id``) and move the schedule to the plan's next run, in one transaction; a
        schedule the plan returns None for is left as it is. Safe in several processes at
        once: a schedule one of them is firing is skipped by the others, so each firing is
        made once."""

    async def trigger_schedule(
        self, schedule_id: str, now: datetime, plan: FiringPlan, new_task_id: Callable[[], str]
    ) -> tuple[Fired, Schedule]:
        """Fire one schedule now, whether due or paused, as fire_due_schedules fires a due one
        (waiting for a firing of it in flight); the firing and the schedule as it committed.
        Raises ScheduleNotFound."""

    async def next_schedule_at(self, skip: Collection[str] = ()) -> datetime | None:
        """The earliest next run of any schedule but those in ``skip`` (None: none will fire)."""

    # --- counts and charts --------------------------------------------------------------
    # Tasks per queue and status come from a table triggers keep (migration 0014), so
    # get_queue and list_queues do not count the tasks table.
    async def fold_task_counts(self) -> None:
        """Tidy the kept counts (PostgreSQL: fold the rows appended per statement into one
        per queue and status; SQLite: drop zeros). Safe in several processes at once."""

    async def miscounted_queues(self) -> list[str]:
        """The queues whose kept counts differ from their tasks (a write that fired no
        trigger: triggers disabled, a restore); reads the whole tasks table (for doctor)."""

    async def recount_tasks(self) -> None:
        """Replace the kept counts by a count of the tasks (writers wait meanwhile)."""

    async def add_delivery_minutes(self, stats: Sequence[MinuteStats]) -> None:
        """Add these counts to the stored ones of their series and minute (other processes
        add theirs too), in one transaction."""

    async def delivery_minutes(self, scope: Scope, name: str | None, since: datetime) -> list[MinuteStats]:
        """The stored minutes of one series (None: of every series of ``scope``) from ``since``
        on, oldest first."""

    async def prune_delivery_minutes(self, before: datetime) -> None:
        """Delete every series' minutes before ``before``."""
