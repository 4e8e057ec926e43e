"""A tenant's export (GET /v1/tenants/{tenant}/export, docs/retention.md): everything of it,
endpoint by endpoint, event by event (each page followed by its deliveries and their
attempts), then its plain tasks and its endpoints' test deliveries; a page at a time, so
memory stays flat however large the tenant. Every row once: each is read by one keyset walk.

A tenant's own key exports what it may read through the API: its endpoints, events, their
deliveries and attempts; not the plain tasks that carry its name, nor test deliveries,
which are the operator's (their headers may hold the operator's credentials)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Literal

from workly.errors import TenantNotFound
from workly.lifecycle import ExportedTask
from workly.models import Attempt, Task
from workly.storage.contract import ExportStore, TenantStore, WebhookStore
from workly.webhooks import Endpoint, Event

ExportKind = Literal["endpoint", "event", "task", "attempt"]
ExportItem = tuple[ExportKind, Endpoint | Event | Task | Attempt]
PageReader = Callable[[int, int], Awaitable[list[ExportedTask]]]  # (after_seq, limit) → a page
EVENTS_PAGE = 50  # events read at once (a payload is at most WORKLY_MAX_BODY_BYTES)
TASKS_PAGE = 100  # tasks read at once, with their attempts


class TenantExport:
    def __init__(
        self, tenants: TenantStore, webhooks: WebhookStore, export: ExportStore,
        events_page: int = EVENTS_PAGE, tasks_page: int = TASKS_PAGE,
    ) -> None:  # fmt: skip
        self._tenants = tenants
        self._webhooks = webhooks
        self._export = export
        self._events_page = events_page
        self._tasks_page = tasks_page

    async def items(self, tenant: str, operators: bool = True) -> AsyncIterator[ExportItem]:
        """The tenant's items, once it is known to exist (TenantNotFound before the first);
        ``operators``: its plain tasks and test deliveries too (not for its own keys)."""
        if await self._tenants.get_tenant(tenant) is None and not (
            operators and await self._export.tenant_tasks(tenant, 0, 1)
        ):
            raise TenantNotFound(tenant)
        return self._walk(tenant, operators)

    async def _walk(self, tenant: str, operators: bool) -> AsyncIterator[ExportItem]:
        endpoint_ids: list[str] = []
        before: int | None = None
        while True:
            endpoints, before = await self._webhooks.list_endpoints(tenant, self._events_page, before)
            for endpoint in endpoints:
                endpoint_ids.append(endpoint.id)
                yield "endpoint", endpoint
            if before is None:
                break
        while True:
            events, before = await self._webhooks.list_events(None, tenant, self._events_page, before)
            for event in events:
                yield "event", event
            async for item in self._pages(partial(self._export.tasks_of_events, [e.id for e in events])):
                yield item
            if before is None:
                break
        if not operators:
            return
        async for item in self._pages(partial(self._export.tenant_tasks, tenant)):
            yield item
        for endpoint_id in endpoint_ids:
            async for item in self._pages(partial(self._export.test_deliveries, endpoint_id)):
                yield item

    async def _pages(self, read: PageReader) -> AsyncIterator[ExportItem]:
        """Every page ``read(after_seq, limit)`` gives, each task followed by its attempts."""
        after = 0
        while page := await read(after, self._tasks_page):
            for exported in page:
                yield "task", exported.task
                for attempt in exported.attempts:
                    yield "attempt", attempt
            if len(page) < self._tasks_page:
                return
            after = page[-1].seq
