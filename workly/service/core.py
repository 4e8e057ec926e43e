"""The application core: one object, built from Settings, that every adapter calls.

``Service`` owns the storage, the enqueuer, the dispatcher, the scheduler, the housekeeper
and the metrics, and their lifecycle (``start``, ``stop``; or ``async with service.running()``).
Each use case is one method: enqueue, the task and queue changes, the reads. The API, the
fast enqueue path, the dashboard and the CLI only parse, authorise, call one of these and
render; none of them touches the storage.

Every change that can make work claimable (an enqueue, a retry, a resumed or changed
queue, tasks the reaper returned) ends in ``work_available``: it wakes this process's
dispatcher at once and sends the other processes one coalesced NOTIFY (PostgreSQL), so
they claim within milliseconds instead of at their next poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime

from workly.batching import CoalescedCall
from workly.clock import Clock, SystemClock
from workly.config import Settings
from workly.delivery_stats import Rollup
from workly.dispatch.deliverer import Deliverer
from workly.dispatch.dispatcher import Dispatcher
from workly.dispatch.http import HttpClient, client_tls
from workly.errors import (
    ConfigError,
    ServiceNotRunning,
    StorageError,
    TaskNotFound,
    TooLarge,
)
from workly.metrics import Metrics
from workly.models import Attempt, Enqueued, NewTask, Task, TaskStatus
from workly.service.callbacks import CallbackSender
from workly.service.delivery_history import DeliveryHistory
from workly.service.enqueuer import Enqueuer
from workly.service.failures import FailureUseCases
from workly.service.housekeeping import Housekeeper
from workly.service.operations import OperationRunner
from workly.service.queues import QueueUseCases
from workly.service.scheduler import Scheduler
from workly.service.schedules import ScheduleUseCases
from workly.service.webhooks import WebhookUseCases, check_not_endpoint_queue
from workly.signing import Signer
from workly.storage.base import Storage
from workly.storage.factory import open_storage
from workly.trace_context import parse_trace_context, stored
from workly.tracing import Tracing
from workly.tracing_setup import tracing_from_environment

log = logging.getLogger("workly")
StorageOpener = Callable[[Settings], Awaitable[Storage]]


async def open_configured_storage(settings: Settings) -> Storage:
    """The storage WORKLY_DATABASE_URL names, with the settings' timeouts and durability."""
    if settings.database_url is None:
        raise ConfigError("WORKLY_DATABASE_URL is required")
    return await open_storage(
        settings.database_url,
        sqlite_synchronous=settings.sqlite_synchronous,
        db_timeout=settings.db_timeout,
        # None when not configured: public, unless an earlier install is found elsewhere.
        schema=settings.database_schema if "database_schema" in settings.model_fields_set else None,
    )


async def migrate_database(
    settings: Settings, storage_opener: StorageOpener = open_configured_storage
) -> tuple[list[int], int]:
    """Apply pending migrations, starting nothing else (`workly migrate`): the versions
    applied and the schema version now."""
    storage = await storage_opener(settings)
    try:
        return await _migrate(storage, settings), await storage.schema_version()
    finally:
        await storage.close()


async def _migrate(storage: Storage, settings: Settings) -> list[int]:
    """Apply pending migrations and tell the SQL functions this process's body limit."""
    applied = await storage.migrate()
    await storage.set_sql_limits(settings.max_body_bytes)
    return applied


def outbound_client(settings: Settings) -> HttpClient:
    """The HTTP client deliveries go through, as the WORKLY_OUTBOUND_* settings make it.
    Raises ConfigError for a CA, certificate or key file that cannot be used."""
    return HttpClient(
        max_body=settings.response_snippet_bytes,
        policy=settings.outbound_policy(),
        ssl_context=client_tls(
            settings.outbound_ca_file, settings.outbound_client_cert, settings.outbound_client_key
        ),
        proxy=settings.proxy(),
        max_idle=max(256, settings.max_in_flight),
    )


@dataclass(frozen=True, slots=True)
class Readiness:
    """What /health/ready reports."""

    database_error: str | None  # None: the database answered
    dispatcher: str  # "ok", "down", "disabled" (an API-only process), "unknown" (no database)


@dataclass
class _Parts:
    """What a started service runs on."""

    storage: Storage
    client: HttpClient
    dispatcher: Dispatcher
    enqueuer: Enqueuer
    housekeeper: Housekeeper
    history: DeliveryHistory
    announcer: CoalescedCall
    callbacks: CallbackSender
    operations: OperationRunner
    scheduler: Scheduler


class Service(QueueUseCases, WebhookUseCases, FailureUseCases, ScheduleUseCases):
    def __init__(
        self,
        settings: Settings,
        clock: Clock | None = None,
        *,
        storage_opener: StorageOpener = open_configured_storage,
        http_client: HttpClient | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """Builds nothing that connects: ``start`` does. Raises ConfigError for settings a
        service cannot run with (no database URL, a signing secret that does not decode).
        The service closes what it holds when it stops, an injected HTTP client included."""
        if settings.database_url is None:
            raise ConfigError("WORKLY_DATABASE_URL is required")
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.metrics = Metrics()
        self._signer = Signer(settings.signing_secrets())
        self._open_storage = storage_opener
        self._http_client = http_client
        self._parts: _Parts | None = None
        self._stop_now = False  # stop_now was called: the next stop waits for no delivery
        self._own_events: set[asyncio.Task[None]] = set()
        # Made at start from the OTEL_* variables (workly/tracing.py), unless injected.
        self._given_tracing = tracing
        self.tracing: Tracing = tracing or Tracing()

    # --- lifecycle ------------------------------------------------------------------
    async def start(self) -> None:
        """Open the storage, apply migrations, listen for other processes' work, and start
        dispatching and housekeeping (unless WORKLY_DISPATCH is false)."""
        if self._parts is not None:
            raise RuntimeError("the service is already running")
        settings = self.settings
        # What may refuse the settings comes before anything opens (nothing to close then).
        client = self._http_client or outbound_client(settings)
        try:
            storage = await self._open_storage(settings)
        except BaseException:
            await client.close()
            raise
        self.tracing = self._given_tracing or tracing_from_environment()
        try:
            applied = await _migrate(storage, settings)
            if applied:
                log.info("applied migrations %s", applied)
            self._parts = parts = self._assemble(storage, client)
            if not settings.dispatch:
                # An API-only process listens too: that is how it learns that dispatching
                # processes exist, and so announces its changes to them.
                await storage.listen_for_work(_nobody)
            else:
                # 0: looks at the idle poll's pace, so that arrivals never pile up.
                sql_looks = settings.sql_poll_interval or settings.poll_interval
                await storage.listen_for_work(parts.dispatcher.wake, sql_looks)
                parts.dispatcher.start()
                await parts.housekeeper.start()
                parts.callbacks.start()
                parts.operations.start()
                parts.scheduler.start()
        except BaseException:
            self._parts = None
            await client.close()
            await storage.close()
            await self._stop_tracing()
            raise

    def _assemble(self, storage: Storage, client: HttpClient) -> _Parts:
        settings, clock, metrics = self.settings, self.clock, self.metrics
        deliverer = Deliverer(
            client, self._signer, clock, capture_limit=settings.max_body_bytes, tracing=self.tracing
        )
        rollup = Rollup()
        history = DeliveryHistory(storage, clock, rollup)
        dispatcher = Dispatcher(
            storage, deliverer, clock,
            max_in_flight=settings.max_in_flight,
            poll_interval=settings.poll_interval, lease_margin=settings.lease_margin,
            result_batch_max=settings.result_batch_max, metrics=metrics,
            breaker_rules=settings.breaker_rules(), on_recorded=self.on_recorded, tracing=self.tracing,
            rollup=rollup,
        )  # fmt: skip
        housekeeper = Housekeeper(
            storage, clock, reap_interval=settings.reap_interval, work_available=self.work_available,
            vacuum_interval=settings.vacuum_interval, retention=settings.retention, metrics=metrics,
            reindex_interval=settings.reindex_interval,
            # A probe goes out within half a second of its cool-down ending (sooner when the
            # cool-down itself is shorter).
            probe_interval=min(0.5, settings.breaker_cooldown), history=history,
        )  # fmt: skip
        enqueuer = Enqueuer(
            storage, clock, self.work_available, metrics=metrics,
            dispatcher=dispatcher if settings.dispatch and settings.eager_dispatch else None,
        )  # fmt: skip
        return _Parts(
            storage=storage,
            client=client,
            dispatcher=dispatcher,
            enqueuer=enqueuer,
            housekeeper=housekeeper,
            history=history,
            announcer=CoalescedCall(storage.announce_work, _log_announce_error),
            callbacks=CallbackSender(storage, enqueuer.enqueue, clock, metrics=metrics),
            operations=OperationRunner(storage, clock, self.work_available, metrics=metrics),
            scheduler=Scheduler(
                storage, clock, self.work_available, poll_interval=settings.poll_interval, metrics=metrics
            ),
        )

    async def stop(self) -> None:
        """Stop housekeeping, answer the enqueues in flight, give deliveries in flight
        WORKLY_SHUTDOWN_GRACE seconds, then close the HTTP client and the storage."""
        parts = self._parts
        if parts is None:
            return
        try:
            # The parts stay reachable until all is drained: a commit that lands meanwhile
            # still ends in work_available, and its caller gets its answer.
            await parts.housekeeper.stop()
            await parts.scheduler.stop()  # after the firing in flight
            await parts.operations.stop()  # after its chunk in flight; the rest resumes later
            await parts.callbacks.stop()  # what is still due stays marked for the next sweep
            await parts.enqueuer.drain()
            if self._stop_now:  # asked for before this stop began, or before the service started
                parts.dispatcher.abandon()
            await parts.dispatcher.stop(grace=self.settings.shutdown_grace)
            await self._write_history(parts.history)  # the last seconds' counts
            await self.drain_own_events()  # what the last results announce
            await parts.announcer.drain()  # and the wake-ups all of the above sent
        finally:
            self._parts = None
            self._stop_now = False  # a service started again waits out its next stop
            await parts.client.close()
            await parts.storage.close()
            await self._stop_tracing()

    @staticmethod
    async def _write_history(history: DeliveryHistory) -> None:
        try:
            await history.flush()
        except Exception as exc:  # a chart's last seconds are not worth a failed stop
            log.warning("writing the last delivery counts failed: %s", exc)

    def stop_now(self) -> None:
        """Cut a stop short (a second Ctrl-C): the deliveries in flight are not waited for;
        their leases bring them back through the reaper, here or in another process. Called
        before the stop (even before the service has started: a Ctrl-C may come at any
        moment), it holds for that stop."""
        self._stop_now = True
        if self._parts is not None:
            self._parts.dispatcher.abandon()

    async def _stop_tracing(self) -> None:
        if self.tracing.enabled:
            await asyncio.to_thread(self.tracing.shutdown)  # exports what is left (blocking)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Service]:
        await self.start()
        try:
            yield self
        finally:
            await self.stop()

    def work_available(self) -> None:
        """The hook every change that can make work claimable ends in, after its commit:
        this process's dispatcher claims now, other processes hear one coalesced NOTIFY.
        Once the service has stopped there is nobody left to wake: it does nothing."""
        parts = self._parts
        if parts is None:
            return
        parts.dispatcher.wake()
        parts.announcer.trigger()

    def now(self) -> datetime:
        return self.clock.now()

    def _operations_wake(self) -> None:
        """A bulk operation was created: this process's runner looks now (when it runs one)."""
        parts = self._parts
        if parts is not None and self.settings.dispatch:
            parts.operations.wake()

    def _scheduler_wake(self) -> None:
        """A schedule was created or changed: this process's scheduler looks now."""
        parts = self._parts
        if parts is not None and self.settings.dispatch:
            parts.scheduler.wake()

    def _callbacks_wake(self) -> None:
        parts = self._parts
        if parts is not None:
            parts.callbacks.wake()

    async def readiness(self) -> Readiness:
        """The database answers (within 2 s) and, in a dispatching process, its loop ticks."""
        parts = self._started()
        try:
            await asyncio.wait_for(parts.storage.ping(), timeout=2)
        except Exception as exc:
            # A storage error names the driver's error it stands for (TimeoutError, OSError, …).
            cause = exc.__cause__ if isinstance(exc, StorageError) and exc.__cause__ else exc
            return Readiness(database_error=type(cause).__name__, dispatcher="unknown")
        if not self.settings.dispatch:
            return Readiness(None, "disabled")
        alive = parts.dispatcher.alive(self.settings.ready_stall_seconds)
        return Readiness(None, "ok" if alive else "down")

    def _storage(self) -> Storage:
        return self._started().storage

    def _history(self) -> DeliveryHistory:
        return self._started().history

    def _started(self) -> _Parts:
        if self._parts is None:
            raise ServiceNotRunning  # a 503: a request that came too early or too late
        return self._parts

    @property
    def dispatcher(self) -> Dispatcher:
        """For tests that look beneath the service; adapters never use it."""
        return self._started().dispatcher

    @property
    def scheduler(self) -> Scheduler:
        """For tests that look beneath the service; adapters never use it."""
        return self._started().scheduler

    # --- tasks ----------------------------------------------------------------------
    async def enqueue(self, tasks: Sequence[NewTask]) -> list[Enqueued]:
        """Store tasks (one request's: one, or a batch) in one transaction shared with
        concurrent requests; TooLarge (nothing stored) if a body is over the limit."""
        check_body_sizes(tasks, self.settings.max_body_bytes)
        for task in tasks:
            check_not_endpoint_queue(task.queue)
        enqueuer = self._started().enqueuer
        if not self.tracing.enabled:
            return await enqueuer.enqueue(tasks)
        # One request's tasks share its trace context: the span's, once it is made.
        first = tasks[0]
        attributes = {"messaging.system": "workly", "messaging.destination.name": first.queue,
                      "messaging.batch.message_count": len(tasks)}  # fmt: skip
        with self.tracing.enqueue("workly.enqueue", parse_trace_context(first.traceparent, first.tracestate),
                                  attributes) as context:  # fmt: skip
            traceparent, tracestate = stored(context)
            return await enqueuer.enqueue(
                [replace(task, traceparent=traceparent, tracestate=tracestate) for task in tasks]
            )

    async def get_task(self, task_id: str) -> Task:
        task = await self._started().storage.get_task(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        return task

    async def list_tasks(
        self, queue: str | None, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        """A page of tasks, newest first, and the seq to continue before (None: the last page)."""
        return await self._started().storage.list_tasks(queue, status, limit, before_seq)

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        return await self._started().storage.list_attempts(task_id)

    async def cancel_task(self, task_id: str) -> Task:
        return await self._started().storage.cancel_task(task_id, self.clock.now())

    async def retry_task(self, task_id: str) -> Task:
        task = await self._started().storage.retry_task(task_id, self.clock.now())
        self.work_available()
        return task


def check_body_sizes(tasks: Sequence[NewTask], limit: int) -> None:
    """TooLarge (413) for the first task whose body, as it would be sent, exceeds ``limit``."""
    for index, task in enumerate(tasks):
        size = len(task.body)
        if size > limit:
            where = "the task's" if len(tasks) == 1 else f"task {index}'s"
            raise TooLarge(f"{where} body is {size:,} bytes; at most {limit:,} (WORKLY_MAX_BODY_BYTES)")


def _nobody() -> None:
    """An API-only process has no dispatcher to wake."""


def _log_announce_error(exc: Exception) -> None:
    # Other processes still find the work at their next poll.
    log.warning("could not notify other processes of new work: %s", exc)
