"""A tenant's export (GET /v1/tenants/{tenant}/export, docs/retention.md): its tasks with
their attempts, a page at a time, so that the export holds one page in memory however
large the tenant. Its endpoints and events come from WebhookStore's lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from workly.lifecycle import ExportedTask


class ExportStore(Protocol):
    async def tasks_of_events(
        self, event_ids: Sequence[str], after_seq: int, limit: int
    ) -> list[ExportedTask]:
        """The next ``limit`` deliveries of these events after ``after_seq``, in seq order."""

    async def tenant_tasks(self, tenant: str, after_seq: int, limit: int) -> list[ExportedTask]:
        """The tenant's next ``limit`` plain tasks after ``after_seq``, in seq order."""

    async def test_deliveries(self, endpoint_id: str, after_seq: int, limit: int) -> list[ExportedTask]:
        """The endpoint's next ``limit`` deliveries of no event (test events), in seq order."""
