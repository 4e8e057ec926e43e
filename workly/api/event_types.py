"""The event catalogue's routes: declare, read, list, change and remove event types
(docs/webhooks.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from workly.api.event_type_schemas import EventTypeIn, EventTypePatchIn
from workly.api.pages import Cursor, Limit, page
from workly.errors import EventTypeNotFound, InvalidEventType, ReservedName
from workly.web.dependencies import ServiceDep
from workly.web.responses import JSONResponse
from workly.web.webhook_representation import event_type_json
from workly.webhooks import MAX_EVENT_TYPE, check_event_type, is_workly_event

router = APIRouter(prefix="/v1/event-types", tags=["event types"])


def _type_path(event_type: Annotated[str, Path(max_length=MAX_EVENT_TYPE)]) -> str:
    try:
        return check_event_type(event_type)
    except ValueError:  # no such type can exist
        raise EventTypeNotFound(event_type) from None


def _declarable(event_type: Annotated[str, Path(max_length=MAX_EVENT_TYPE)]) -> str:
    try:
        check_event_type(event_type)
    except ValueError as exc:  # a name no type may have: say which names are
        raise InvalidEventType(str(exc), [("/type", "not an event type name")]) from None
    if is_workly_event(event_type):
        raise ReservedName("event types starting with 'workly.' are Workly's own; choose another prefix")
    return event_type


TypePath = Annotated[str, Depends(_type_path)]


@router.put(
    "/{event_type}",
    summary="Declare an event type, or replace its declaration",
    responses={201: {"description": "Declared"}, 200: {"description": "Its declaration replaced"}},
)
async def put_event_type(
    event_type: Annotated[str, Depends(_declarable)], body: EventTypeIn, service: ServiceDep
) -> JSONResponse:
    stored, created = await service.catalogue.put_event_type(event_type, body.spec())
    return JSONResponse(event_type_json(stored), status_code=201 if created else 200)


@router.get("", summary="List the catalogue's event types, newest first")
async def list_event_types(
    service: ServiceDep, include_deprecated: bool = False, limit: Limit = 50, cursor: Cursor = None
) -> JSONResponse:
    return await page(
        "event_types",
        cursor,
        lambda before: service.catalogue.list_event_types(include_deprecated, limit, before),
        event_type_json,
    )


@router.get("/{event_type}", summary="Get an event type with its schema and examples")
async def get_event_type(event_type: TypePath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(event_type_json(await service.catalogue.get_event_type(event_type)))


@router.patch("/{event_type}", summary="Change some of an event type's fields")
async def patch_event_type(event_type: TypePath, body: EventTypePatchIn, service: ServiceDep) -> JSONResponse:
    return JSONResponse(
        event_type_json(await service.catalogue.update_event_type(event_type, body.changes()))
    )


@router.delete("/{event_type}", status_code=204, summary="Remove an event type from the catalogue")
async def delete_event_type(event_type: TypePath, service: ServiceDep) -> Response:
    await service.catalogue.delete_event_type(event_type)
    return Response(status_code=204)
