"""The composition root: the storage a process opens, and the parts a started Service runs
on, each given the storage role it uses (workly/storage/contract).

Only this module and the migration entry points hold a whole ``Storage``; everything they
build takes one role (the dispatcher a DispatchStore, the enqueuer a TaskStore, …).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workly.batching import CoalescedCall
from workly.clock import Clock
from workly.config import Settings
from workly.delivery_stats import Rollup
from workly.dispatch.deliverer import Deliverer
from workly.dispatch.dispatcher import Dispatcher
from workly.dispatch.http import HttpClient, client_tls
from workly.errors import ConfigError
from workly.metrics import Metrics
from workly.models import AttemptResult, RecordSummary
from workly.secret_box import SecretBox
from workly.service.audit import AuditUseCases
from workly.service.bulk_operations import BulkOperationUseCases
from workly.service.callbacks import CallbackSender
from workly.service.catalogue import CatalogueUseCases
from workly.service.delivery_history import DeliveryHistory
from workly.service.enqueuer import Enqueuer
from workly.service.export import TenantExport
from workly.service.keys import KeyUseCases
from workly.service.operation_runner import OperationRunner
from workly.service.own_events import OwnEvents
from workly.service.queues import QueueUseCases
from workly.service.scheduler import Scheduler
from workly.service.schedules import ScheduleUseCases
from workly.service.sessions import SessionUseCases
from workly.service.tasks import TaskUseCases
from workly.service.tenants import TenantUseCases
from workly.service.upkeep import Maintainer, Upkeep
from workly.service.upkeep.audit_pruning import AuditPruning
from workly.service.upkeep.breaker_probes import BreakerProbes
from workly.service.upkeep.count_fold import CountFold
from workly.service.upkeep.history_writes import HistoryPruning, HistoryWrites
from workly.service.upkeep.index_rebuilds import IndexRebuilds
from workly.service.upkeep.queue_gauges import QueueGauges
from workly.service.upkeep.reaper import Reaper
from workly.service.upkeep.retention import Retention
from workly.service.upkeep.running_recount import RunningRecount
from workly.service.upkeep.vacuum import Vacuum
from workly.service.webhooks import WebhookUseCases
from workly.signing import Signer
from workly.storage.contract import Storage
from workly.storage.factory import open_storage
from workly.tracing import Tracing


async def open_configured_storage(settings: Settings, clock: Clock | None = None) -> Storage:
    """The storage WORKLY_DATABASE_URL names, with the settings' timeouts and durability."""
    if settings.database_url is None:
        raise ConfigError("WORKLY_DATABASE_URL is required")
    return await open_storage(
        settings.database_url,
        sqlite_synchronous=settings.sqlite_synchronous,
        db_timeout=settings.db_timeout,
        # None when not configured: public, unless an earlier install is found elsewhere.
        schema=settings.database_schema if "database_schema" in settings.model_fields_set else None,
        clock=clock,
    )


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


@dataclass
class Parts:
    """What a started service runs on: its background parts, and the use cases it holds."""

    storage: Storage
    client: HttpClient
    dispatcher: Dispatcher
    enqueuer: Enqueuer
    upkeep: Upkeep
    history: DeliveryHistory
    announcer: CoalescedCall
    callbacks: CallbackSender
    operation_runner: OperationRunner
    scheduler: Scheduler
    own_events: OwnEvents
    tasks: TaskUseCases
    queues: QueueUseCases
    webhooks: WebhookUseCases
    operations: BulkOperationUseCases
    schedules: ScheduleUseCases
    tenants: TenantUseCases
    keys: KeyUseCases
    audit: AuditUseCases
    sessions: SessionUseCases
    catalogue: CatalogueUseCases


def assemble(
    settings: Settings,
    clock: Clock,
    metrics: Metrics,
    signer: Signer,
    tracing: Tracing,
    storage: Storage,
    client: HttpClient,
    work_available: Callable[[], None],
    announce_failed: Callable[[Exception], None],
    box: SecretBox | None = None,
) -> Parts:
    """``work_available``: the hook every change that can make work claimable ends in;
    ``announce_failed``: what to do when telling other processes about work failed."""
    box = box or SecretBox([])
    deliverer = Deliverer(
        client, signer, clock, capture_limit=settings.max_body_bytes, tracing=tracing, open_secret=box.open
    )
    rollup = Rollup()
    history = DeliveryHistory(storage.history, clock, rollup)
    own_events = OwnEvents(storage.tasks, storage.webhooks, clock, work_available)

    def recorded(results: Sequence[AttemptResult], summary: RecordSummary) -> None:
        """After each batch of attempt results: freed tasks are claimable now, final
        outcomes with a callback are due, and some results are announced as events."""
        if summary.released:
            work_available()
        if any(r.has_callback and r.outcome != "retry" for r in results):
            callbacks.wake()
        own_events.results_recorded(results, summary)

    dispatcher = Dispatcher(
        storage.dispatch, deliverer, clock,
        max_in_flight=settings.max_in_flight,
        poll_interval=settings.poll_interval, lease_margin=settings.lease_margin,
        result_batch_max=settings.result_batch_max, metrics=metrics,
        breaker_rules=settings.breaker_rules(), on_recorded=recorded, tracing=tracing,
        rollup=rollup, kept_on_retry=settings.response_snippet_bytes,
    )  # fmt: skip
    enqueuer = Enqueuer(
        storage.tasks, clock, work_available, metrics=metrics,
        dispatcher=dispatcher if settings.dispatch and settings.eager_dispatch else None,
    )  # fmt: skip
    callbacks = CallbackSender(storage.callbacks, enqueuer.enqueue, clock, metrics=metrics)
    runner = OperationRunner(storage.operations, clock, work_available, metrics=metrics)
    scheduler = Scheduler(
        storage.schedules, clock, work_available, poll_interval=settings.poll_interval, metrics=metrics
    )
    limit = settings.max_body_bytes
    keys = KeyUseCases(storage.keys, clock)
    catalogue = CatalogueUseCases(storage.catalogue, clock, settings.event_types)
    # Only a dispatching process runs the operation runner and the scheduler.
    wake_runner = runner.wake if settings.dispatch else _nobody
    wake_scheduler = scheduler.wake if settings.dispatch else _nobody
    return Parts(
        storage=storage,
        client=client,
        dispatcher=dispatcher,
        enqueuer=enqueuer,
        upkeep=Upkeep(clock, maintainers(settings, clock, metrics, storage, history, work_available)),
        history=history,
        announcer=CoalescedCall(storage.notifier.announce_work, announce_failed),
        callbacks=callbacks,
        operation_runner=runner,
        scheduler=scheduler,
        own_events=own_events,
        tasks=TaskUseCases(storage.tasks, enqueuer, clock, tracing, work_available, max_body_bytes=limit),
        queues=QueueUseCases(storage.queues, history, signer, clock, work_available, box),
        webhooks=WebhookUseCases(
            storage.webhooks,
            storage.tasks,
            clock,
            tracing,
            own_events,
            work_available,
            catalogue,
            max_body_bytes=limit,
            box=box,
        ),
        operations=BulkOperationUseCases(storage.operations, clock, wake_runner, settings.retention),
        schedules=ScheduleUseCases(
            storage.schedules,
            clock,
            metrics,
            work_available,
            wake_scheduler,
            max_body_bytes=limit,
            check_event=catalogue.check_event,
        ),
        tenants=TenantUseCases(
            storage.tenants, clock, TenantExport(storage.tenants, storage.webhooks, storage.export)
        ),
        keys=keys,
        audit=AuditUseCases(storage.audit),
        sessions=SessionUseCases(storage.sessions, keys, clock),
        catalogue=catalogue,
    )


def _nobody() -> None:
    """There is no such part in this process to wake."""


def maintainers(
    settings: Settings,
    clock: Clock,
    metrics: Metrics,
    storage: Storage,
    history: DeliveryHistory,
    work_available: Callable[[], None],
) -> list[Maintainer]:
    """The upkeep jobs of a dispatching process, at the settings' intervals."""
    upkeep = storage.upkeep
    return [
        Reaper(upkeep, clock, work_available, metrics, every=settings.reap_interval),
        Retention(storage.retention, clock, settings.retention, settings.failed_retention),
        RunningRecount(upkeep, work_available),
        # A probe goes out within half a second of its cool-down ending (sooner when the
        # cool-down itself is shorter).
        BreakerProbes(upkeep, clock, work_available, every=min(0.5, settings.breaker_cooldown)),
        QueueGauges(storage.queues, storage.webhooks, metrics),
        CountFold(upkeep),
        IndexRebuilds(upkeep, metrics, every=settings.reindex_interval),
        HistoryWrites(history),
        HistoryPruning(history),
        AuditPruning(storage.audit, clock, settings.audit_retention),
        Vacuum(upkeep, storage.database, settings.vacuum_interval),  # last: tests replace it
    ]
