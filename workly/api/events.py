"""Event routes: publish (fan out to the matching endpoints), read, list, delete
(docs/webhooks.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query, Response

from workly.api.idempotency import IDEMPOTENCY_KEY_PATTERN
from workly.api.pages import Cursor, Limit, page
from workly.api.schemas import ShortText
from workly.api.trace import TraceHeaders
from workly.api.webhook_schemas import EventIn
from workly.errors import EventNotFound
from workly.web.dependencies import ServiceDep
from workly.web.problems import problem
from workly.web.responses import JSONResponse
from workly.web.webhook_representation import event_json
from workly.webhooks import EVENT_TYPE, MAX_EVENT_TYPE

router = APIRouter(prefix="/v1/events", tags=["events"])


def _event_id(event_id: Annotated[str, Path(max_length=64)]) -> str:
    if "\x00" in event_id:
        raise EventNotFound(event_id)
    return event_id


@router.post("", status_code=201, summary="Publish an event to every subscribed endpoint")
async def publish_event(
    event: EventIn,
    service: ServiceDep,
    trace: TraceHeaders,
    idempotency_key: Annotated[
        str | None, Header(min_length=1, max_length=255, pattern=f"^{IDEMPOTENCY_KEY_PATTERN}$")
    ] = None,
) -> JSONResponse:
    if idempotency_key and event.idempotency_key and idempotency_key != event.idempotency_key:
        return problem(422, "The Idempotency-Key header and the idempotency_key field differ.")
    published = await service.webhooks.publish(event.new_event(service.now(), idempotency_key, trace))
    return JSONResponse(event_json(published.event), status_code=201 if published.created else 200)


@router.get("", summary="List events, newest first")
async def list_events(
    service: ServiceDep,
    type: Annotated[str | None, Query(max_length=MAX_EVENT_TYPE, pattern=f"^{EVENT_TYPE}$")] = None,
    tenant: Annotated[ShortText | None, Query()] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> JSONResponse:
    return await page(
        "events", cursor, lambda before: service.webhooks.list_events(type, tenant, limit, before), event_json
    )


@router.get("/{event_id}", summary="Get an event with each delivery's status")
async def get_event(event_id: Annotated[str, Depends(_event_id)], service: ServiceDep) -> JSONResponse:
    return JSONResponse(event_json(await service.webhooks.get_event(event_id)))


@router.delete(
    "/{event_id}",
    status_code=204,
    summary="Delete an event with its deliveries, their attempts and callbacks",
    responses={409: {"description": "One of its deliveries is being sent"}},
)
async def delete_event(event_id: Annotated[str, Depends(_event_id)], service: ServiceDep) -> Response:
    await service.webhooks.delete_event(event_id)
    return Response(status_code=204)
