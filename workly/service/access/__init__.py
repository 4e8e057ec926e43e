"""The service as one principal may use it: the one place access is decided.

``Service.scoped(principal)`` returns a ``ScopedService``: the same use cases under the same
names (``tasks``, ``queues``, ``webhooks``, ``operations``, ``schedules``, ``tenants``,
``keys``, ``audit``, ``catalogue``), each of which asks ``Access`` (decisions.py) before it acts. The API,
the fast enqueue path and the dashboard all call the service through it, so every route
gets the same decision; none of them decides access itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from workly.access import Principal
from workly.config import Settings
from workly.metrics import Metrics
from workly.service.access.decisions import Access, AuditNote
from workly.service.access.scoped_admin import ScopedAudit, ScopedKeys, ScopedTenants
from workly.service.access.scoped_catalogue import ScopedCatalogue
from workly.service.access.scoped_global import ScopedOperations, ScopedSchedules
from workly.service.access.scoped_tasks import ScopedQueues, ScopedTasks
from workly.service.access.scoped_webhooks import ScopedWebhooks
from workly.service.audit import AuditUseCases
from workly.service.bulk_operations import BulkOperationUseCases
from workly.service.catalogue import CatalogueUseCases
from workly.service.keys import KeyUseCases
from workly.service.queues import QueueUseCases
from workly.service.readiness import Readiness
from workly.service.schedules import ScheduleUseCases
from workly.service.tasks import TaskUseCases
from workly.service.tenants import TenantUseCases
from workly.service.webhooks import WebhookUseCases


class Service(Protocol):
    """What of workly/service/core.py's Service this layer wraps (core imports this package)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def metrics(self) -> Metrics: ...
    def now(self) -> datetime: ...
    async def readiness(self) -> Readiness: ...
    @property
    def tasks(self) -> TaskUseCases: ...
    @property
    def queues(self) -> QueueUseCases: ...
    @property
    def webhooks(self) -> WebhookUseCases: ...
    @property
    def operations(self) -> BulkOperationUseCases: ...
    @property
    def schedules(self) -> ScheduleUseCases: ...
    @property
    def tenants(self) -> TenantUseCases: ...
    @property
    def keys(self) -> KeyUseCases: ...
    @property
    def audit(self) -> AuditUseCases: ...
    @property
    def catalogue(self) -> CatalogueUseCases: ...


__all__ = ["Access", "AuditNote", "ScopedService"]


class ScopedService:
    def __init__(self, service: Service, principal: Principal, note: AuditNote | None = None) -> None:
        self._service = service
        self.access = Access(principal, note)

    @property
    def principal(self) -> Principal:
        return self.access.principal

    @property
    def settings(self) -> Settings:
        return self._service.settings

    def read_metrics(self) -> Metrics:
        """/metrics: open to all when WORKLY_PUBLIC_METRICS says so; else for untenanted
        readers (every endpoint's series: a tenant-scoped key finds none, 404)."""
        if not self._service.settings.public_metrics:
            self.access.untenanted("metrics")
            self.access.act("metrics.read", "read")
        return self._service.metrics

    def now(self) -> datetime:
        return self._service.now()

    async def readiness(self) -> Readiness:
        return await self._service.readiness()

    @property
    def tasks(self) -> ScopedTasks:
        return ScopedTasks(self._service.tasks, self._service.webhooks, self.access)

    @property
    def queues(self) -> ScopedQueues:
        return ScopedQueues(self._service.queues, self._service.webhooks, self.access)

    @property
    def webhooks(self) -> ScopedWebhooks:
        return ScopedWebhooks(self._service.webhooks, self._service.operations, self.access)

    @property
    def operations(self) -> ScopedOperations:
        return ScopedOperations(self._service.operations, self._service.webhooks, self.access)

    @property
    def schedules(self) -> ScopedSchedules:
        return ScopedSchedules(self._service.schedules, self.access)

    @property
    def tenants(self) -> ScopedTenants:
        return ScopedTenants(self._service.tenants, self._service.operations, self.access)

    @property
    def keys(self) -> ScopedKeys:
        return ScopedKeys(self._service.keys, self.access)

    @property
    def audit(self) -> ScopedAudit:
        return ScopedAudit(self._service.audit, self.access)

    @property
    def catalogue(self) -> ScopedCatalogue:
        return ScopedCatalogue(self._service.catalogue, self.access)
