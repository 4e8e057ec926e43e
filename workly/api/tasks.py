"""Task routes: enqueue (one or a batch), read, list, cancel, retry, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from workly.api.idempotency import IDEMPOTENCY_KEY_PATTERN, DifferentIdempotencyKeys, idempotency_key_of
from workly.api.schemas import TaskBatchIn, TaskIn, inline_json_schema
from workly.api.trace import TraceHeaders
from workly.errors import TaskNotFound
from workly.media import is_json_type
from workly.models import QUEUE_NAME, TaskStatus
from workly.service.access import ScopedService
from workly.trace_context import TraceContext
from workly.web import representation as rep
from workly.web.dependencies import ServiceDep
from workly.web.problems import problem, unsupported_media_type
from workly.web.responses import JSONResponse

router = APIRouter(prefix="/v1", tags=["tasks"])
_TASK_BODY = {"required": True, "content": {"application/json": {"schema": inline_json_schema(TaskIn)}}}

QueuePath = Annotated[str, Path(pattern=f"^{QUEUE_NAME}$", max_length=128)]


def _task_id(task_id: Annotated[str, Path(max_length=64)]) -> str:
    # No task id holds NUL, and PostgreSQL text cannot: answer 404 here, not 500 there.
    if "\x00" in task_id:
        raise TaskNotFound(task_id)
    return task_id


TaskPath = Annotated[str, Depends(_task_id)]


@router.post(
    "/queues/{queue}/tasks",
    status_code=201,
    summary="Enqueue a task",
    openapi_extra={"requestBody": _TASK_BODY},
)
async def enqueue_task(
    queue: QueuePath,
    request: Request,
    service: ServiceDep,
    trace: TraceHeaders,
    idempotency_key: Annotated[
        str | None, Header(min_length=1, max_length=255, pattern=f"^{IDEMPOTENCY_KEY_PATTERN}$")
    ] = None,
) -> JSONResponse:
    # Valid requests are served by api/fast_enqueue.py before they reach this route; it
    # answers the rest (every error) and is the documented operation. Both validate the
    # same way: pydantic-core straight from the body bytes.
    content_type = request.headers.get("content-type")
    if not (content_type and is_json_type(content_type)):
        return unsupported_media_type(content_type)
    try:
        task = TaskIn.model_validate_json(await request.body())
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
    try:
        key = idempotency_key_of(task, idempotency_key)
    except DifferentIdempotencyKeys as exc:
        return problem(422, str(exc))
    return await enqueue_one(service, queue, task, key, trace)


async def enqueue_one(
    service: ScopedService, queue: str, task: TaskIn, idempotency_key: str | None, trace: TraceContext | None
) -> JSONResponse:
    """Enqueue one validated task: 201 with the task, or 200 with the one its key matched."""
    [stored] = await service.tasks.enqueue([task.new_task(queue, service.now(), idempotency_key, trace)])
    if not stored.created:  # the task its key matched: as stored
        return JSONResponse(rep.task_json(stored.task), status_code=200)
    return JSONResponse(rep.task_json(stored.task, task.body_fields()), status_code=201)


@router.post("/queues/{queue}/tasks/batch", status_code=201, summary="Enqueue up to 1,000 tasks at once")
async def enqueue_batch(
    queue: QueuePath, batch: TaskBatchIn, service: ServiceDep, trace: TraceHeaders
) -> JSONResponse:
    now = service.now()
    stored = await service.tasks.enqueue([task.new_task(queue, now, trace=trace) for task in batch.tasks])
    return JSONResponse({"tasks": [rep.task_json(entry.task) for entry in stored]}, status_code=201)


Limit = Annotated[int, Query(ge=1, le=1000)]
Cursor = Annotated[str | None, Query(max_length=64)]


@router.get("/queues/{queue}/tasks", summary="List a queue's tasks, newest first")
async def list_tasks(
    queue: QueuePath,
    service: ServiceDep,
    status: TaskStatus | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> JSONResponse:
    return await _task_page(service, queue, status, limit, cursor)


@router.get("/tasks", summary="List tasks of every queue (or of one), newest first")
async def list_all_tasks(
    service: ServiceDep,
    queue: Annotated[str | None, Query(pattern=f"^{QUEUE_NAME}$", max_length=128)] = None,
    status: TaskStatus | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> JSONResponse:
    return await _task_page(service, queue, status, limit, cursor)


async def _task_page(
    service: ScopedService, queue: str | None, status: TaskStatus | None, limit: int, cursor: str | None
) -> JSONResponse:
    before = None
    if cursor is not None:
        try:
            before = rep.decode_cursor(cursor)
        except ValueError:
            return problem(400, "The cursor is invalid: pass next_cursor from a previous page.", "bad-cursor")
    tasks, next_seq = await service.tasks.list_tasks(queue, status, limit, before)
    return JSONResponse(
        {"tasks": [rep.task_json(task) for task in tasks], "next_cursor": rep.encode_cursor(next_seq)}
    )


@router.get("/tasks/{task_id}", summary="Get a task")
async def get_task(task_id: TaskPath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(rep.task_json(await service.tasks.get_task(task_id)))


@router.get("/tasks/{task_id}/attempts", summary="List a task's attempts, oldest first")
async def list_attempts(task_id: TaskPath, service: ServiceDep) -> JSONResponse:
    attempts = await service.tasks.list_attempts(task_id)
    return JSONResponse({"attempts": [rep.attempt_json(attempt) for attempt in attempts]})


@router.post("/tasks/{task_id}/cancel", summary="Cancel a ready task")
async def cancel_task(task_id: TaskPath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(rep.task_json(await service.tasks.cancel_task(task_id)))


@router.post("/tasks/{task_id}/retry", summary="Re-enqueue a failed or canceled task")
async def retry_task(task_id: TaskPath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(rep.task_json(await service.tasks.retry_task(task_id)))


@router.delete(
    "/tasks/{task_id}",
    status_code=204,
    summary="Delete a task with its attempts and callbacks (not while it runs)",
    responses={409: {"description": "The task is being sent"}},
)
async def delete_task(task_id: TaskPath, service: ServiceDep) -> Response:
    await service.tasks.delete_task(task_id)
    return Response(status_code=204)
