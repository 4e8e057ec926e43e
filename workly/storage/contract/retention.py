"""Retention (workly/service/upkeep/retention.py, docs/retention.md): finished tasks and
events expire. Every method deletes at most ``limit`` rows, oldest first, in one short
transaction, and is safe in several processes at once; each returns how many it deleted."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from workly.lifecycle import RetentionOverride


class RetentionStore(Protocol):
    async def prune_succeeded(self, before: datetime, limit: int = 1000) -> int:
        """Succeeded tasks (with their attempts) finished before ``before`` whose queue and
        tenant have no retention of their own."""

    async def prune_failed(self, before: datetime, limit: int = 1000) -> int:
        """Failed and canceled tasks, as ``prune_succeeded``."""

    async def retention_overrides(self) -> list[RetentionOverride]:
        """The queues and tenants with a retention of their own other than forever."""

    async def prune_queue(self, queue: str, before: datetime, limit: int = 1000) -> int:
        """The queue's finished tasks finished before ``before``, whatever their outcome."""

    async def prune_tenant(self, tenant: str, before: datetime, limit: int = 1000) -> int:
        """The tenant's finished plain tasks and the finished deliveries of its events,
        finished before ``before``."""

    async def prune_tenant_events(self, tenant: str, before: datetime, limit: int = 1000) -> int:
        """The tenant's events published before ``before`` none of whose deliveries is left."""

    async def prune_events(self, before: datetime, limit: int = 1000) -> int:
        """Events published before ``before`` none of whose deliveries is left, of tenants
        without a retention of their own (and of none)."""

    async def prune_retired_queues(self) -> int:
        """The queues of deleted endpoints none of whose deliveries is left."""
