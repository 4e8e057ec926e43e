"""Failure handling's use cases: bulk operations (docs/failures.md).

A part of Service (``class Service(…, FailureUseCases)``): the methods use its storage,
clock and operation runner. Retry policies are the dispatcher's (dispatch/policy.py) and
callbacks the sender's (service/callbacks.py); what is left here is asking for, and
reading, bulk retries and cancels.
"""

from __future__ import annotations

from workly.errors import InvalidOperation, OperationNotFound
from workly.ids import new_id
from workly.operations import ACTIONS, Action, Operation, TaskFilter
from workly.service.part import ServicePart


class FailureUseCases(ServicePart):
    def _operations_wake(self) -> None:
        raise NotImplementedError

    async def create_operation(self, action: Action, task_filter: TaskFilter) -> Operation:
        """Store a bulk retry or cancel of the tasks ``task_filter`` matches now; it runs in
        the background (progress: get_operation). A filter must name at least one field:
        an operation on every task is never what was meant."""
        if action not in ACTIONS:
            raise InvalidOperation(f"action must be one of {', '.join(ACTIONS)}")
        if task_filter.is_empty():
            raise InvalidOperation("the filter must name at least one field (queue, status, …)")
        operation = await self._storage().create_operation(new_id("op"), action, task_filter, self.now())
        self._operations_wake()
        return operation

    async def get_operation(self, operation_id: str) -> Operation:
        operation = await self._storage().get_operation(operation_id)
        if operation is None:
            raise OperationNotFound(operation_id)
        return operation

    async def list_operations(self, limit: int, before_seq: int | None) -> tuple[list[Operation], int | None]:
        return await self._storage().list_operations(limit, before_seq)
