"""Bulk operations' and schedules' use cases as one principal may call them: both belong to
no tenant, so a tenant-scoped key finds none of them (404), but for the replays of its own
endpoints, which it started (POST /v1/endpoints/{id}/replay) and may follow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workly.access import Permission
from workly.errors import EndpointNotFound, OutOfScope
from workly.operations import Action, Operation, TaskFilter
from workly.schedules import Schedule, ScheduleSpec
from workly.service.access.decisions import Access
from workly.service.bulk_operations import BulkOperationUseCases
from workly.service.schedules import ScheduleUseCases
from workly.service.webhooks import WebhookUseCases


class ScopedOperations:
    def __init__(self, operations: BulkOperationUseCases, webhooks: WebhookUseCases, access: Access) -> None:
        self._operations = operations
        self._webhooks = webhooks
        self._access = access

    def _act(self, action: str, permission: Permission, target: str | None = None,
             changes: Mapping[str, Any] | None = None) -> None:  # fmt: skip
        self._access.untenanted("operations" if target is None else f"operation {target!r}")
        self._access.act(action, permission, target, changes=changes)

    def may_create(self) -> None:
        """Refuse now (404, 403) what create_operation would: for a caller that reads what an
        operation will cover first (the dashboard's endpoint), so that 404 still wins."""
        self._act("operation.create", "write")

    async def create_operation(self, action: Action, task_filter: TaskFilter) -> Operation:
        self._act("operation.create", "write", changes={"action": action, **task_filter.given()})
        operation = await self._operations.create_operation(action, task_filter)
        self._access.note.target = operation.id
        return operation

    async def get_operation(self, operation_id: str) -> Operation:
        tenant = self._access.tenant
        if tenant is None:
            self._act("operation.read", "read", operation_id)
            return await self._operations.get_operation(operation_id)
        operation = await self._operations.get_operation(operation_id)
        if operation.action != "replay" or not await self._tenants_endpoint(operation.filter.endpoint_id):
            raise OutOfScope(f"operation {operation_id!r}")
        self._access.act("operation.read", "read", operation_id)
        return operation

    async def _tenants_endpoint(self, endpoint_id: str | None) -> bool:
        try:
            endpoint = await self._webhooks.get_endpoint(str(endpoint_id))
        except EndpointNotFound:
            return False
        return endpoint.spec.tenant == self._access.tenant

    async def list_operations(self, limit: int, before_seq: int | None) -> tuple[list[Operation], int | None]:
        self._act("operation.list", "read")
        return await self._operations.list_operations(limit, before_seq)


class ScopedSchedules:
    def __init__(self, schedules: ScheduleUseCases, access: Access) -> None:
        self._schedules = schedules
        self._access = access

    def _act(self, action: str, permission: Permission, target: str | None = None,
             changes: Mapping[str, Any] | None = None) -> None:  # fmt: skip
        self._access.untenanted("schedules" if target is None else f"schedule {target!r}")
        self._access.act(action, permission, target, changes=changes)

    async def create_schedule(self, spec: ScheduleSpec) -> Schedule:
        self._act("schedule.create", "write", changes={"cron": spec.cron, "name": spec.name})
        schedule = await self._schedules.create_schedule(spec)
        self._access.note.target = schedule.id
        return schedule

    async def get_schedule(self, schedule_id: str) -> Schedule:
        self._act("schedule.read", "read", schedule_id)
        return await self._schedules.get_schedule(schedule_id)

    async def list_schedules(self, limit: int, before_seq: int | None) -> tuple[list[Schedule], int | None]:
        self._act("schedule.list", "read")
        return await self._schedules.list_schedules(limit, before_seq)

    async def update_schedule(self, schedule_id: str, changes: Mapping[str, Any]) -> Schedule:
        self._act(
            "schedule.update",
            "write",
            schedule_id,
            {k: v for k, v in changes.items() if k not in ("task", "event", "template")},
        )
        return await self._schedules.update_schedule(schedule_id, changes)

    async def pause_schedule(self, schedule_id: str) -> Schedule:
        self._act("schedule.pause", "write", schedule_id)
        return await self._schedules.pause_schedule(schedule_id)

    async def resume_schedule(self, schedule_id: str) -> Schedule:
        self._act("schedule.resume", "write", schedule_id)
        return await self._schedules.resume_schedule(schedule_id)

    async def delete_schedule(self, schedule_id: str) -> None:
        self._act("schedule.delete", "write", schedule_id)
        await self._schedules.delete_schedule(schedule_id)

    async def trigger_schedule(self, schedule_id: str) -> Schedule:
        self._act("schedule.trigger", "write", schedule_id)
        return await self._schedules.trigger_schedule(schedule_id)
