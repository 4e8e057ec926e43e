"""The dashboard's bulk operations (docs/failures.md): the "Retry all failed" buttons of a
queue and of an endpoint, an operation's page with its progress, and the list of operations.

A button only asks for the operation (``service.operations.create_operation``, as POST /v1/operations
does) and goes to its page: the work runs in the background, in whichever process runs the
dispatcher (service/operation_runner.py), so the page shows progress as it is committed and
reloads itself while the operation runs. Forms are guarded like every dashboard form
(access.require_same_origin, and the app's outer guards).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from workly.errors import NotFoundError
from workly.models import is_queue_name
from workly.operations import CHANGES_FROM, Operation, TaskFilter
from workly.service.access import ScopedService
from workly.ui.access import require_same_origin
from workly.ui.rendering import PAGE_SIZE, back, could_be_id, error, older_link, page_start, render
from workly.web import representation as rep
from workly.web.dependencies import ServiceDep

_DONE = {"started": "Started: it runs in the background, and this page follows it until it ends."}
# How a filter's fields read on the pages, in TaskFilter's order.
FILTER_LABELS = {
    "queue": "queue",
    "endpoint_id": "endpoint",
    "event_type": "event type",
    "tenant": "tenant",
    "key": "key",
    "status": "status",
    "created_after": "created at or after",
    "created_before": "created before",
    "last_status_code": "last status code",
}

router = APIRouter(
    prefix="/ui",
    include_in_schema=False,
    dependencies=[Depends(require_same_origin)],  # who may see /ui: the token guard (web/guards.py)
)


# --- pages -------------------------------------------------------------------------------------


@router.get("/operations")
async def operation_list(request: Request, service: ServiceDep, cursor: str | None = None) -> HTMLResponse:
    operations, next_seq = await service.operations.list_operations(PAGE_SIZE, page_start(cursor))
    return render(
        request, "operations.html", operations=[_shown(o) for o in operations], labels=FILTER_LABELS,
        older=older_link("/ui/operations", {}, next_seq),
        running=any(o.state == "running" for o in operations),
    )  # fmt: skip


@router.get("/operations/{operation_id}")
async def operation_page(
    request: Request, operation_id: str, service: ServiceDep, done: str | None = None
) -> HTMLResponse:
    try:
        if not could_be_id(operation_id):
            raise NotFoundError(operation_id)
        operation = await service.operations.get_operation(operation_id)
    except NotFoundError:
        return error(request, 404, "There is no such operation.")
    return render(
        request, "operation.html", operation=_shown(operation), labels=FILTER_LABELS,
        changes_from=CHANGES_FROM[operation.action], done=_DONE.get(done or ""),
    )  # fmt: skip


def _shown(operation: Operation) -> dict[str, Any]:
    """The API's view of an operation, and how far it has got: ``done`` of ``matched``
    tasks (changed or skipped), ``percent`` of them (None while nothing matched)."""
    shown = rep.operation_json(operation)
    done = operation.changed + operation.skipped
    shown["done"] = done
    shown["percent"] = min(100, done * 100 // operation.matched) if operation.matched else None
    return shown


# --- buttons -----------------------------------------------------------------------------------
# Each asks for a retry of the failed tasks there are now: tasks that fail later are not its
# business (workly/operations.py), and pressing it again asks for another operation.


@router.post("/queues/{queue}/retry-failed")
async def retry_failed_in_queue(request: Request, queue: str, service: ServiceDep) -> Response:
    if not is_queue_name(queue):
        return error(request, 404, "There is no such queue.")
    try:
        found = await service.queues.get_queue(queue)
    except NotFoundError:
        return error(request, 404, "There is no such queue.")
    return await _retry_failed(service, TaskFilter(queue=found.name, status="failed"))


@router.post("/endpoints/{endpoint_id}/retry-failed")
async def retry_failed_of_endpoint(request: Request, endpoint_id: str, service: ServiceDep) -> Response:
    service.operations.may_create()
    try:
        if not could_be_id(endpoint_id):
            raise NotFoundError(endpoint_id)
        endpoint = await service.webhooks.get_endpoint(endpoint_id)
    except NotFoundError:
        return error(request, 404, "There is no such endpoint: it may have been deleted.")
    return await _retry_failed(service, TaskFilter(endpoint_id=endpoint.id, status="failed"))


async def _retry_failed(service: ScopedService, task_filter: TaskFilter) -> Response:
    operation = await service.operations.create_operation("retry", task_filter)
    # Where to: a path made here from the new id, never one the request names.
    return back(f"/ui/operations/{operation.id}", "started")
