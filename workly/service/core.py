"""The application core: one object, built from Settings, that every adapter calls.

``Service`` owns the storage, the enqueuer, the dispatcher, the scheduler, the upkeep
and the metrics, and their lifecycle (``start``, ``stop``; or ``async with service.running()``).
Its use cases are grouped in objects it holds, one per subject: ``service.tasks``,
``service.queues``, ``service.webhooks``, ``service.operations`` (bulk operations) and
``service.schedules``. The API, the fast enqueue path, the dashboard and the CLI only
parse, authorise, call one of these and render; none of them touches the storage.

Every change that can make work claimable (an enqueue, a retry, a resumed or changed
queue, tasks the reaper returned) ends in ``work_available``: it wakes this process's
dispatcher at once and sends the other processes one coalesced NOTIFY (PostgreSQL), so
they claim within milliseconds instead of at their next poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial

from workly.access import Principal
from workly.clock import Clock, SystemClock
from workly.config import Settings
from workly.dispatch.dispatcher import Dispatcher
from workly.dispatch.http import HttpClient
from workly.errors import ConfigError, ServiceNotRunning, StorageError
from workly.metrics import Metrics
from workly.secret_box import SecretBox, parse_keys
from workly.service.access import AuditNote, ScopedService
from workly.service.assembly import Parts, assemble, open_configured_storage, outbound_client
from workly.service.audit import AuditUseCases
from workly.service.bulk_operations import BulkOperationUseCases
from workly.service.catalogue import CatalogueUseCases
from workly.service.delivery_history import DeliveryHistory
from workly.service.keys import KeyUseCases
from workly.service.queues import QueueUseCases
from workly.service.readiness import Readiness
from workly.service.scheduler import Scheduler
from workly.service.schedules import ScheduleUseCases
from workly.service.sessions import SessionUseCases
from workly.service.tasks import TaskUseCases
from workly.service.tenants import TenantUseCases
from workly.service.webhooks import WebhookUseCases
from workly.signing import Signer
from workly.storage.contract import Storage
from workly.tracing import Tracing
from workly.tracing_setup import tracing_from_environment

__all__ = ["Readiness", "Service", "migrate_database", "open_configured_storage", "outbound_client"]

log = logging.getLogger("workly")
StorageOpener = Callable[[Settings], Awaitable[Storage]]


async def migrate_database(
    settings: Settings, storage_opener: StorageOpener = open_configured_storage
) -> tuple[list[int], int]:
    """Apply pending migrations, starting nothing else (`workly migrate`): the versions
    applied and the schema version now."""
    storage = await storage_opener(settings)
    try:
        return await _migrate(storage, settings), await storage.database.schema_version()
    finally:
        await storage.close()


async def _migrate(storage: Storage, settings: Settings) -> list[int]:
    """Apply pending migrations and tell the SQL functions this process's body limit."""
    applied = await storage.database.migrate()
    await storage.database.set_sql_limits(settings.max_body_bytes)
    return applied


class Service:
    def __init__(
        self,
        settings: Settings,
        clock: Clock | None = None,
        *,
        storage_opener: StorageOpener | None = None,
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
        self.metrics = Metrics(per_endpoint=settings.metrics_per_endpoint)
        self._signer = Signer(settings.signing_secrets())
        self._secret_box = SecretBox(parse_keys(settings.secret_key))
        self._open_storage = storage_opener or partial(open_configured_storage, clock=self.clock)
        self._http_client = http_client
        self._parts: Parts | None = None
        self._stop_now = False  # stop_now was called: the next stop waits for no delivery
        # Made at start from the OTEL_* variables (workly/tracing.py), unless injected.
        self._given_tracing = tracing
        self.tracing: Tracing = tracing or Tracing()

    # --- lifecycle ------------------------------------------------------------------
    async def start(self) -> None:
        """Open the storage, apply migrations, listen for other processes' work, and start
        dispatching and upkeep (unless WORKLY_DISPATCH is false)."""
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
            await parts.catalogue.announce_mode()
            if not settings.dispatch:
                # An API-only process listens too: that is how it learns that dispatching
                # processes exist, and so announces its changes to them.
                await storage.notifier.listen_for_work(_nobody)
            else:
                # 0: looks at the idle poll's pace, so that arrivals never pile up.
                sql_looks = settings.sql_poll_interval or settings.poll_interval
                await storage.notifier.listen_for_work(
                    parts.dispatcher.wake, sql_looks, self.metrics.sql_enqueued
                )
                parts.dispatcher.start()
                await parts.upkeep.start()
                parts.callbacks.start()
                parts.operation_runner.start()
                parts.scheduler.start()
        except BaseException:
            started, self._parts = self._parts, None
            if started is not None:  # what began before the failure stops before the storage closes
                await started.upkeep.stop()
                await started.dispatcher.stop(grace=0)
            await client.close()
            await storage.close()
            await self._stop_tracing()
            raise

    def _assemble(self, storage: Storage, client: HttpClient) -> Parts:
        return assemble(
            self.settings, self.clock, self.metrics, self._signer, self.tracing, storage, client,
            work_available=self.work_available, announce_failed=_log_announce_error, box=self._secret_box,
        )  # fmt: skip

    async def stop(self) -> None:
        """Stop upkeep, answer the enqueues in flight, give deliveries in flight
        WORKLY_SHUTDOWN_GRACE seconds, then close the HTTP client and the storage."""
        parts = self._parts
        if parts is None:
            return
        try:
            # The parts stay reachable until all is drained: a commit that lands meanwhile
            # still ends in work_available, and its caller gets its answer.
            await parts.upkeep.stop()
            await parts.scheduler.stop()  # after the firing in flight
            await parts.operation_runner.stop()  # after its chunk in flight; the rest resumes later
            await parts.callbacks.stop()  # what is still due stays marked for the next sweep
            await parts.enqueuer.drain()
            if self._stop_now:  # asked for before this stop began, or before the service started
                parts.dispatcher.abandon()
            await parts.dispatcher.stop(grace=self.settings.shutdown_grace)
            await self._write_history(parts.history)  # the last seconds' counts
            await parts.own_events.drain()  # what the last results announce
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

    async def readiness(self) -> Readiness:
        """The database answers (within 2 s) and, in a dispatching process, its loop ticks."""
        parts = self._started()
        try:
            await asyncio.wait_for(parts.storage.database.ping(), timeout=2)
        except Exception as exc:
            # A storage error names the driver's error it stands for (TimeoutError, OSError, …).
            cause = exc.__cause__ if isinstance(exc, StorageError) and exc.__cause__ else exc
            return Readiness(database_error=type(cause).__name__, dispatcher="unknown")
        if not self.settings.dispatch:
            return Readiness(None, "disabled")
        alive = parts.dispatcher.alive(self.settings.ready_stall_seconds)
        return Readiness(None, "ok" if alive else "down")

    def _started(self) -> Parts:
        if self._parts is None:
            raise ServiceNotRunning  # a 503: a request that came too early or too late
        return self._parts

    @property
    def storage(self) -> Storage:
        """For tests that look beneath the service; adapters never use it."""
        return self._started().storage

    @property
    def dispatcher(self) -> Dispatcher:
        """For tests that look beneath the service; adapters never use it."""
        return self._started().dispatcher

    @property
    def scheduler(self) -> Scheduler:
        """For tests that look beneath the service; adapters never use it."""
        return self._started().scheduler

    # --- the use cases -----------------------------------------------------------------
    # Each raises ServiceNotRunning (a 503) before the service has started or once it stopped.
    @property
    def tasks(self) -> TaskUseCases:
        return self._started().tasks

    @property
    def queues(self) -> QueueUseCases:
        return self._started().queues

    @property
    def webhooks(self) -> WebhookUseCases:
        return self._started().webhooks

    @property
    def operations(self) -> BulkOperationUseCases:
        """Bulk retries and cancels (docs/failures.md)."""
        return self._started().operations

    @property
    def schedules(self) -> ScheduleUseCases:
        return self._started().schedules

    @property
    def tenants(self) -> TenantUseCases:
        return self._started().tenants

    @property
    def keys(self) -> KeyUseCases:
        return self._started().keys

    @property
    def audit(self) -> AuditUseCases:
        return self._started().audit

    @property
    def catalogue(self) -> CatalogueUseCases:
        """Event types (docs/webhooks.md)."""
        return self._started().catalogue

    @property
    def sessions(self) -> SessionUseCases:
        """The dashboard's logins: the login page and the guards use them, before any
        principal is known (no access rule applies)."""
        return self._started().sessions

    def scoped(self, principal: Principal, note: AuditNote | None = None) -> ScopedService:
        """The use cases as ``principal`` may call them (workly/service/access): what every
        adapter calls, so that access is decided in one place."""
        return ScopedService(self, principal, note)


def _nobody() -> None:
    """An API-only process has no dispatcher to wake."""


def _log_announce_error(exc: Exception) -> None:
    # Other processes still find the work at their next poll.
    log.warning("could not notify other processes of new work: %s", exc)
