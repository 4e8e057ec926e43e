"""The dashboard's event catalogue (the types with their schemas and examples) and an
endpoint's routing buttons: change its filter, send it a test event, replay what it missed.

Read and changed through the same scoped service as the API (/v1/event-types,
/v1/endpoints/{id}/test, /replay, PATCH filter); the buttons are plain form posts, guarded
like every dashboard form, that redirect back to the endpoint's page with a notice.
"""

from __future__ import annotations

import json
from datetime import timedelta

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from workly.errors import EndpointDisabled, InvalidEventType, InvalidQueueConfig, NotFoundError, ReplayRunning
from workly.event_filter import compile_filter
from workly.ui.access import require_same_origin
from workly.ui.rendering import (
    PAGE_SIZE,
    back,
    could_be_id,
    error,
    form_value,
    older_link,
    page_start,
    render,
    unusable_form,
)
from workly.web.dependencies import ServiceDep
from workly.web.webhook_representation import event_type_json
from workly.webhooks import check_event_type

# The replay button's choices: how far back it looks.
REPLAY_WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "3d": timedelta(days=3)}
DONE = {
    "tested": "A test event is on its way: it is the newest of the delivery tasks below.",
    "replaying": "Replay started: the events this endpoint missed are delivered in the background.",
    "filtered": "Filter saved: it applies to the next events published.",
}

router = APIRouter(prefix="/ui", include_in_schema=False, dependencies=[Depends(require_same_origin)])


@router.get("/event-types")
async def event_type_list(
    request: Request, service: ServiceDep, deprecated: str | None = None, cursor: str | None = None
) -> HTMLResponse:
    include = deprecated == "shown"
    types, next_seq = await service.catalogue.list_event_types(include, PAGE_SIZE, page_start(cursor))
    return render(
        request, "event_types.html", event_types=[_shown(event_type_json(t)) for t in types],
        deprecated=include, older=older_link("/ui/event-types", {"deprecated": deprecated}, next_seq),
    )  # fmt: skip


@router.get("/event-types/{event_type}")
async def event_type_page(request: Request, event_type: str, service: ServiceDep) -> HTMLResponse:
    try:
        check_event_type(event_type)
        found = await service.catalogue.get_event_type(event_type)
    except (ValueError, NotFoundError):
        return error(request, 404, "There is no such event type in the catalogue.")
    return render(request, "event_type.html", event_type=_shown(event_type_json(found)))


@router.post("/endpoints/{endpoint_id}/test")
async def send_test(request: Request, endpoint_id: str, service: ServiceDep) -> Response:
    event_type = await form_value(request, "event_type")
    if event_type is None:
        return unusable_form(request)
    if not could_be_id(endpoint_id):
        return error(request, 404, "There is no such endpoint.")
    try:
        await service.webhooks.send_test(endpoint_id, event_type or None)
    except NotFoundError:
        return error(request, 404, "There is no such endpoint: it may have been deleted.")
    except EndpointDisabled as exc:
        return error(request, 409, str(exc))
    except InvalidEventType as exc:
        return error(request, 422, str(exc))
    return back(f"/ui/endpoints/{endpoint_id}", "tested")


@router.post("/endpoints/{endpoint_id}/replay")
async def replay(request: Request, endpoint_id: str, service: ServiceDep) -> Response:
    window = await form_value(request, "window", "24h")
    if window is None:
        return unusable_form(request)
    if not could_be_id(endpoint_id):
        return error(request, 404, "There is no such endpoint.")
    if window not in REPLAY_WINDOWS:
        return error(request, 422, f"Replay looks back {', '.join(REPLAY_WINDOWS)}: choose one of them.")
    try:
        await service.webhooks.replay_endpoint(endpoint_id, service.now() - REPLAY_WINDOWS[window])
    except NotFoundError:
        return error(request, 404, "There is no such endpoint: it may have been deleted.")
    except ReplayRunning:
        return error(
            request, 409, "This endpoint is being replayed already: replay again once it has finished."
        )
    return back(f"/ui/endpoints/{endpoint_id}", "replaying")


@router.post("/endpoints/{endpoint_id}/filter")
async def change_filter(request: Request, endpoint_id: str, service: ServiceDep) -> Response:
    filter_json = await form_value(request, "filter_json")
    if filter_json is None:
        return unusable_form(request)
    if not could_be_id(endpoint_id):
        return error(request, 404, "There is no such endpoint.")
    try:
        given = json.loads(filter_json) if filter_json.strip() else None
        compiled = None if given is None else compile_filter(given)
    except ValueError as exc:
        return error(request, 422, f"That filter cannot be used: {exc}")
    except RecursionError:
        return error(request, 422, "That filter cannot be used: it is nested far too deep.")
    try:
        await service.webhooks.update_endpoint(endpoint_id, {"filter": compiled})
    except NotFoundError:
        return error(request, 404, "There is no such endpoint: it may have been deleted.")
    except (InvalidQueueConfig, InvalidEventType) as exc:
        return error(request, 422, str(exc))
    return back(f"/ui/endpoints/{endpoint_id}", "filtered")


def _shown(event_type: dict[str, object]) -> dict[str, object]:
    """The type with its schema and examples as indented JSON text (the template escapes it)."""
    examples = event_type["examples"]
    assert isinstance(examples, list)
    return {
        **event_type,
        "schema_text": None if event_type["schema"] is None else json.dumps(event_type["schema"], indent=2),
        "example_texts": [json.dumps(example, indent=2, ensure_ascii=False) for example in examples],
    }
