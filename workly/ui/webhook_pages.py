"""The dashboard's webhook pages: endpoints with their health, an endpoint with its delivery
tasks, events, and an event with its deliveries; Enable and Disable buttons (an endpoint's
"Retry all failed" is operation_pages.py's).

Like the queue and task pages (pages.py), they read and change through the same service
methods as the API (/v1/endpoints, /v1/events), and the buttons are plain form posts,
guarded like every dashboard form (access.require_same_origin, and the app's outer guards),
that redirect back. Endpoint URLs, descriptions, event types, tenants and payloads are what
API clients wrote: the templates autoescape every one of them.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from workly.body import parse_json
from workly.errors import NotFoundError
from workly.event_filter import EventFilter, filter_json
from workly.media import is_json_type
from workly.models import TASK_STATUSES, TaskStatus
from workly.service.access import ScopedService
from workly.ui.access import require_same_origin
from workly.ui.catalogue_pages import DONE as ROUTING_DONE
from workly.ui.catalogue_pages import REPLAY_WINDOWS
from workly.ui.charts import charts_for
from workly.ui.rendering import PAGE_SIZE, back, could_be_id, error, link, older_link, page_start, render
from workly.web import representation as rep
from workly.web.dependencies import ServiceDep
from workly.web.webhook_representation import endpoint_json, event_json
from workly.webhooks import Event, check_event_type

MAX_FILTER = 255  # a tenant is at most this long (the API's ShortText)
MAX_PAYLOAD_SHOWN = 64 * 1024  # characters of an event's payload the event page shows
CATALOGUE_SHOWN = 200  # event types the test button offers
_DONE = {
    "enabled": "Enabled: it receives new events, and its held tasks flow again.",
    "disabled": "Disabled: it gets no new events, and its pending tasks are held until you enable it.",
    **ROUTING_DONE,
}

router = APIRouter(
    prefix="/ui",
    include_in_schema=False,
    dependencies=[Depends(require_same_origin)],  # who may see /ui: the token guard (web/guards.py)
)


# --- endpoints -------------------------------------------------------------------------------


@router.get("/endpoints")
async def endpoint_list(
    request: Request,
    service: ServiceDep,
    tenant: str | None = None,
    cursor: str | None = None,
    done: str | None = None,
) -> HTMLResponse:
    chosen_tenant = filter_text(tenant)
    endpoints, next_seq = await service.webhooks.list_endpoints(chosen_tenant, PAGE_SIZE, page_start(cursor))
    return render(
        request, "endpoints.html", endpoints=[endpoint_json(e) for e in endpoints], tenant=chosen_tenant,
        older=older_link("/ui/endpoints", {"tenant": chosen_tenant}, next_seq),
        refresh=link("/ui/endpoints", {"tenant": chosen_tenant}),
        done=_DONE.get(done or ""),
    )  # fmt: skip


@router.get("/endpoints/{endpoint_id}")
async def endpoint_page(
    request: Request,
    endpoint_id: str,
    service: ServiceDep,
    status: str | None = None,
    cursor: str | None = None,
    done: str | None = None,
) -> HTMLResponse:
    chosen_status: TaskStatus | None = next((s for s in TASK_STATUSES if s == status), None)
    try:
        if not could_be_id(endpoint_id):
            raise NotFoundError(endpoint_id)
        endpoint = await service.webhooks.get_endpoint(endpoint_id)
        tasks, next_seq = await service.webhooks.list_endpoint_tasks(
            endpoint_id, chosen_status, PAGE_SIZE, page_start(cursor)
        )
        # Its delivery tasks are its queue's (named by its id): the counts say whether the page
        # offers "Retry all failed" (operation_pages.py).
        # (Bulk operations are no tenant's: a tenant's key is offered none.)
        failed = 0
        if service.principal.tenant is None:
            failed = (await service.queues.get_queue(endpoint.id)).counts.get("failed", 0)
        minutes = await service.queues.delivery_history("endpoint", endpoint.id)
        catalogue, _ = await service.catalogue.list_event_types(False, CATALOGUE_SHOWN, None)
    except NotFoundError:
        return error(request, 404, "There is no such endpoint: it may have been deleted.")
    path = f"/ui/endpoints/{endpoint.id}"
    return render(
        request, "endpoint.html", endpoint=endpoint_json(endpoint), tasks=[rep.task_json(t) for t in tasks],
        statuses=TASK_STATUSES, status=chosen_status, failed=failed,
        charts=charts_for(minutes, service.now()),
        older=older_link(path, {"status": chosen_status}, next_seq), done=_DONE.get(done or ""),
        filter_text=_filter_text(endpoint.spec.filter), catalogue=[t.type for t in catalogue],
        replay_windows=list(REPLAY_WINDOWS),
    )  # fmt: skip


def _filter_text(found: EventFilter | None) -> str:
    return "" if found is None else json.dumps(filter_json(found.source), indent=2, ensure_ascii=False)


# ?to=list: the button was on the endpoints list, which it returns to (else the endpoint's page).


@router.post("/endpoints/{endpoint_id}/enable")
async def enable(request: Request, endpoint_id: str, service: ServiceDep, to: str | None = None) -> Response:
    return await _set_enabled(request, service, endpoint_id, True, to == "list")


@router.post("/endpoints/{endpoint_id}/disable")
async def disable(request: Request, endpoint_id: str, service: ServiceDep, to: str | None = None) -> Response:
    return await _set_enabled(request, service, endpoint_id, False, to == "list")


async def _set_enabled(
    request: Request, service: ScopedService, endpoint_id: str, enabled: bool, to_list: bool
) -> Response:
    if not could_be_id(endpoint_id):
        return error(request, 404, "There is no such endpoint.")
    try:
        endpoint = await (service.webhooks.enable_endpoint if enabled else service.webhooks.disable_endpoint)(
            endpoint_id
        )
    except NotFoundError:
        return error(request, 404, "There is no such endpoint: it may have been deleted.")
    # Where to: a path made here from the stored id, never one the request names.
    return back("/ui/endpoints" if to_list else f"/ui/endpoints/{endpoint.id}", _state(enabled))


def _state(enabled: bool) -> str:
    return "enabled" if enabled else "disabled"


# --- events ----------------------------------------------------------------------------------


@router.get("/events")
async def event_list(
    request: Request,
    service: ServiceDep,
    type: str | None = None,
    tenant: str | None = None,
    cursor: str | None = None,
) -> HTMLResponse:
    # Filters come from the page's own form: one that could match no event lists every event.
    chosen_type = type if type and _is_event_type(type) else None
    chosen_tenant = filter_text(tenant)
    events, next_seq = await service.webhooks.list_events(
        chosen_type, chosen_tenant, PAGE_SIZE, page_start(cursor)
    )
    filters = {"type": chosen_type, "tenant": chosen_tenant}
    return render(
        request, "events.html", events=[event_row(e) for e in events], type=chosen_type,
        tenant=chosen_tenant, older=older_link("/ui/events", filters, next_seq),
    )  # fmt: skip


@router.get("/events/{event_id}")
async def event_page(request: Request, event_id: str, service: ServiceDep) -> HTMLResponse:
    try:
        if not could_be_id(event_id):
            raise NotFoundError(event_id)
        event = await service.webhooks.get_event(event_id)
    except NotFoundError:
        return error(request, 404, "There is no such event: it may have been deleted by retention.")
    shown = event_json(event)
    del shown["payload_base64"]  # the page shows the payload as text (_payload_text)
    payload = _payload_text(event)
    return render(
        request, "event.html", event=shown, size=len(event.payload), content_type=event.content_type,
        payload=None if payload is None else payload[:MAX_PAYLOAD_SHOWN],
        cut=payload is not None and len(payload) > MAX_PAYLOAD_SHOWN, shown_max=MAX_PAYLOAD_SHOWN,
    )  # fmt: skip


def event_row(event: Event) -> dict[str, Any]:
    """What the events list shows of an event (not its payload, which may be large)."""
    counts = Counter(d.status for d in event.deliveries)
    return {
        "id": event.id,
        "type": event.type,
        "tenant": event.tenant,
        "created_at": rep.time_or_null(event.created_at),
        "deliveries": len(event.deliveries),
        "summary": ", ".join(f"{n} {status}" for status in TASK_STATUSES if (n := counts[status])),
    }


def _payload_text(event: Event) -> str | None:
    """The payload as the event page shows it: indented JSON, else UTF-8 text; None when it
    is neither (binary)."""
    try:
        text = event.payload.decode()
    except UnicodeDecodeError:
        return None
    if is_json_type(event.content_type):
        with contextlib.suppress(ValueError):  # not JSON after all: shown as the text it is
            text = json.dumps(parse_json(text), indent=2, ensure_ascii=False)
    return text


# --- filters -----------------------------------------------------------------------------------


def filter_text(value: str | None) -> str | None:
    """A tenant filter as the API accepts one (1-255 characters, no control characters);
    anything else is no filter."""
    if not value or len(value) > MAX_FILTER or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return None
    return value


def _is_event_type(value: str) -> bool:
    try:
        check_event_type(value)
    except ValueError:
        return False
    return True
