"""The storage contract: narrow roles, one per kind of user, and ``Storage``, what a backend
opens: one object of each role, sharing its connections.

Methods are domain operations, not query execution: nothing above storage sees SQL or a
database driver. Every method raises only Workly's errors (workly/errors.py: not found,
conflict, StorageUnavailable, StorageError; workly/storage/interpret.py). Every method that
reads or writes time takes ``now`` from the caller, so the core runs on an injectable clock
and tests never sleep. Rules that are not about storing (a queue config's consistency, the
body size) are the service's (workly/service); the storage applies what it is given.

Each consumer takes the narrowest role it uses (the dispatcher a ``DispatchStore``, the
enqueuer a ``TaskStore``, …), or a smaller protocol of its own that a role satisfies; only
the composition root (workly/service/assembly.py) and the shared conformance suite hold a
whole ``Storage``.
"""

from __future__ import annotations

from typing import Protocol

from workly.storage.contract.access import AuditStore, KeyStore, SessionStore, TenantChange, TenantStore
from workly.storage.contract.catalogue import CatalogueStore, EventTypeChange
from workly.storage.contract.database import Database
from workly.storage.contract.dispatch import DispatchStore
from workly.storage.contract.export import ExportStore
from workly.storage.contract.history import HistoryStore
from workly.storage.contract.notifier import Notifier
from workly.storage.contract.operations import CallbackStore, OperationStore
from workly.storage.contract.queues import QueueStore
from workly.storage.contract.retention import RetentionStore
from workly.storage.contract.schedules import FiringPlan, ScheduleChange, ScheduleStore
from workly.storage.contract.tasks import TaskStore
from workly.storage.contract.upkeep import UpkeepStore
from workly.storage.contract.webhooks import EndpointChange, WebhookStore

__all__ = [
    "AuditStore",
    "CallbackStore",
    "CatalogueStore",
    "Database",
    "DispatchStore",
    "EndpointChange",
    "EventTypeChange",
    "ExportStore",
    "FiringPlan",
    "HistoryStore",
    "KeyStore",
    "Notifier",
    "OperationStore",
    "QueueStore",
    "RetentionStore",
    "ScheduleChange",
    "ScheduleStore",
    "SessionStore",
    "Storage",
    "TaskStore",
    "TenantChange",
    "TenantStore",
    "UpkeepStore",
    "WebhookStore",
]


class Storage(Protocol):
    """Every role of one backend, over one set of connections (closed by ``close``)."""

    @property
    def dialect(self) -> str: ...

    @property
    def database(self) -> Database: ...

    @property
    def notifier(self) -> Notifier: ...

    @property
    def tasks(self) -> TaskStore: ...

    @property
    def dispatch(self) -> DispatchStore: ...

    @property
    def queues(self) -> QueueStore: ...

    @property
    def webhooks(self) -> WebhookStore: ...

    @property
    def operations(self) -> OperationStore: ...

    @property
    def callbacks(self) -> CallbackStore: ...

    @property
    def schedules(self) -> ScheduleStore: ...

    @property
    def upkeep(self) -> UpkeepStore: ...

    @property
    def retention(self) -> RetentionStore: ...

    @property
    def export(self) -> ExportStore: ...

    @property
    def history(self) -> HistoryStore: ...

    @property
    def tenants(self) -> TenantStore: ...

    @property
    def keys(self) -> KeyStore: ...

    @property
    def audit(self) -> AuditStore: ...

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def catalogue(self) -> CatalogueStore: ...

    async def close(self) -> None:
        """Close every connection (and the notifier's listener)."""
