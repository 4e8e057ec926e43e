"""Bulk operations' use cases (docs/failures.md): asking for, and reading, bulk retries and
cancels, replays (docs/webhooks.md) and a tenant's erasure (docs/retention.md). The
operation runner (service/operation_runner.py) carries them out in the background; retry
policies are the dispatcher's (dispatch/policy.py) and callbacks the sender's
(service/callbacks.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from workly.clock import Clock
from workly.errors import InvalidOperation, OperationNotFound
from workly.ids import new_id
from workly.operations import ACTIONS, Action, Operation, TaskFilter
from workly.storage.contract import OperationStore
from workly.task_json import time_text


class BulkOperationUseCases:
    def __init__(
        self, operations: OperationStore, clock: Clock, wake_runner: Callable[[], None], retention: float = 0
    ) -> None:
        """``wake_runner``: this process's operation runner looks now (when it runs one);
        ``retention``: WORKLY_RETENTION, how far back a replay may look (0: any time)."""
        self._operations = operations
        self._clock = clock
        self._wake_runner = wake_runner
        self._retention = retention

    async def create_operation(self, action: Action, task_filter: TaskFilter) -> Operation:
        """Store a bulk retry or cancel of the tasks ``task_filter`` matches now; it runs in
        the background (progress: get_operation). A filter must name at least one field:
        an operation on every task is never what was meant."""
        if action not in ACTIONS:
            raise InvalidOperation(f"action must be one of {', '.join(ACTIONS)}")
        if task_filter.is_empty():
            raise InvalidOperation("the filter must name at least one field (queue, status, …)")
        operation = await self._operations.create_operation(
            new_id("op"), action, task_filter, self._clock.now()
        )
        self._wake_runner()
        return operation

    async def replay_endpoint(self, endpoint_id: str, since: datetime) -> Operation:
        """Store a replay: every event of the endpoint's tenant since ``since`` that it takes
        now and never received is delivered to it, chunk by chunk in the background. Not
        further back than WORKLY_RETENTION: a delivery retention deleted would look like one
        never made, and go again."""
        now = self._clock.now()
        if self._retention and since < now - timedelta(seconds=self._retention):
            earliest = time_text(now - timedelta(seconds=self._retention))
            raise InvalidOperation(
                f"a replay looks back at most WORKLY_RETENTION ({self._retention:g} s): deliveries older "
                f"than that may be deleted, and would be sent again; give since at or after {earliest}"
            )
        operation = await self._operations.create_operation(
            new_id("op"),
            "replay",
            TaskFilter(endpoint_id=endpoint_id, created_after=since),
            self._clock.now(),
        )
        self._wake_runner()
        return operation

    async def erase_tenant(self, tenant: str) -> Operation:
        """Store the erasure of everything of the tenant (docs/retention.md), worked through
        chunk by chunk in the background; an erase of it still running is answered instead.
        TenantNotFound when nothing names the tenant."""
        operation = await self._operations.create_operation(
            new_id("op"), "erase", TaskFilter(tenant=tenant), self._clock.now()
        )
        self._wake_runner()
        return operation

    async def get_operation(self, operation_id: str) -> Operation:
        operation = await self._operations.get_operation(operation_id)
        if operation is None:
            raise OperationNotFound(operation_id)
        return operation

    async def list_operations(self, limit: int, before_seq: int | None) -> tuple[list[Operation], int | None]:
        return await self._operations.list_operations(limit, before_seq)
