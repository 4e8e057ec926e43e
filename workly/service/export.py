"""A tenant's export (GET /v1/tenants/{tenant}/export, docs/retention.md): everything of it,
endpoint by endpoint, event by event (each followed by its deliveries and their attempts),
then its plain tasks and its endpoints' test deliveries; a page at a time, so memory stays
flat however large the tenant. Every row once: each is read by one keyset walk."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Literal

from workly.errors import TenantNotFound
from workly.lifecycle import ExportedTask
from workly.models import Attempt, Task
from workly.storage.contract import ExportStore, TenantStore, WebhookStore
from workly.webhooks import Endpoint, Event

ExportKind = Literal["endpoint", "event", "task", "attempt"]
ExportItem = tuple[ExportKind, Endpoint | Event | Task | Attempt]
PAGE = 200  # events or tasks per read: what the export holds in memory at once


class TenantExport:
    def __init__(
        self, tenants: TenantStore, webhooks: WebhookStore, export: ExportStore, page: int = PAGE
    ) -> None:
        self._tenants = tenants
        self._webhooks = webhooks
        self._export = export
        self._page = page

    async def items(self, tenant: str) -> AsyncIterator[ExportItem]:
        """The tenant's items, once it is known to exist (TenantNotFound before the first)."""
        first_tasks = await self._export.tenant_tasks(tenant, 0, self._page)
        if await self._tenants.get_tenant(tenant) is None and not first_tasks:
            raise TenantNotFound(tenant)
        return self._walk(tenant, first_tasks)

    async def _walk(self, tenant: str, first_tasks: list[ExportedTask]) -> AsyncIterator[ExportItem]:
        endpoint_ids: list[str] = []
        before: int | None = None
        while True:
            endpoints, before = await self._webhooks.list_endpoints(tenant, self._page, before)
            for endpoint in endpoints:
                endpoint_ids.append(endpoint.id)
                yield "endpoint", endpoint
            if before is None:
                break
        while True:
            events, before = await self._webhooks.list_events(None, tenant, self._page, before)
            for event in events:
                yield "event", event
            for item in _tasks(await self._export.tasks_of_events([event.id for event in events])):
                yield item
            if before is None:
                break
        page = first_tasks
        while page:
            for item in _tasks(page):
                yield item
            page = (
                await self._export.tenant_tasks(tenant, page[-1].seq, self._page)
                if len(page) == self._page
                else []
            )
        for endpoint_id in endpoint_ids:
            after = 0
            while page := await self._export.test_deliveries(endpoint_id, after, self._page):
                for item in _tasks(page):
                    yield item
                after = page[-1].seq


def _tasks(page: Sequence[ExportedTask]) -> list[ExportItem]:
    items: list[ExportItem] = []
    for exported in page:
        items.append(("task", exported.task))
        items += [("attempt", attempt) for attempt in exported.attempts]
    return items
