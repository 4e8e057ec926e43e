"""Bulk operation routes: retry or cancel every task a filter matches (docs/failures.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path
from pydantic import Field, ValidationInfo, field_validator, model_validator

from workly.api.pages import Cursor, Limit, page
from workly.api.schemas import ShortText, _Strict, check_run_at
from workly.errors import OperationNotFound
from workly.models import QUEUE_NAME, TaskStatus
from workly.operations import TaskFilter
from workly.web.dependencies import ServiceDep
from workly.web.representation import operation_json
from workly.web.responses import JSONResponse
from workly.webhooks import EVENT_TYPE, MAX_EVENT_TYPE

router = APIRouter(prefix="/v1/operations", tags=["operations"])


class TaskFilterIn(_Strict):
    """Which tasks: every field given must match; at least one must be given."""

    queue: str | None = Field(default=None, max_length=128, pattern=f"^{QUEUE_NAME}$")
    # An endpoint id is its queue's name (ep_…): the same characters, never a '/'.
    endpoint_id: str | None = Field(default=None, max_length=128, pattern=f"^{QUEUE_NAME}$")
    event_type: str | None = Field(default=None, max_length=MAX_EVENT_TYPE, pattern=f"^{EVENT_TYPE}$")
    tenant: ShortText | None = None
    key: ShortText | None = None
    status: TaskStatus | None = None
    created_after: datetime | None = Field(default=None, description="RFC 3339: created at or after")
    created_before: datetime | None = Field(default=None, description="RFC 3339: created before")
    last_status_code: int | None = Field(default=None, ge=100, le=599)

    @field_validator("created_after", "created_before")
    @classmethod
    def _aware_and_in_range(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        return check_run_at(value, str(info.field_name))

    @model_validator(mode="after")
    def _names_something(self) -> TaskFilterIn:
        after, before = self.created_after, self.created_before
        if after is not None and before is not None and after >= before:
            raise ValueError("created_after must come before created_before: no task could match")
        if all(getattr(self, name) is None for name in type(self).model_fields):
            raise ValueError(
                "a bulk operation's filter must name at least one field (queue, endpoint_id, event_type, "
                "tenant, key, status, created_after, created_before, last_status_code)"
            )
        return self

    def task_filter(self) -> TaskFilter:
        return TaskFilter(**{name: getattr(self, name) for name in type(self).model_fields})


class OperationIn(_Strict):
    action: Literal["retry", "cancel"] = Field(
        description="retry: failed and canceled tasks become ready; cancel: ready tasks are canceled"
    )
    filter: TaskFilterIn


def _operation_id(operation_id: Annotated[str, Path(max_length=64)]) -> str:
    if "\x00" in operation_id:
        raise OperationNotFound(operation_id)
    return operation_id


@router.post("", status_code=202, summary="Retry or cancel every task a filter matches, in the background")
async def create_operation(body: OperationIn, service: ServiceDep) -> JSONResponse:
    operation = await service.operations.create_operation(body.action, body.filter.task_filter())
    return JSONResponse(
        operation_json(operation), status_code=202, headers={"location": f"/v1/operations/{operation.id}"}
    )


@router.get("", summary="List bulk operations, newest first")
async def list_operations(service: ServiceDep, limit: Limit = 50, cursor: Cursor = None) -> JSONResponse:
    return await page(
        "operations", cursor, lambda before: service.operations.list_operations(limit, before), operation_json
    )


@router.get("/{operation_id}", summary="Get a bulk operation and its progress")
async def get_operation(
    operation_id: Annotated[str, Depends(_operation_id)], service: ServiceDep
) -> JSONResponse:
    return JSONResponse(operation_json(await service.operations.get_operation(operation_id)))
