"""Task routes: enqueue (one or a batch), read, list, cancel, retry."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from workly.api import representation as rep
from workly.api.media import is_json_type
from workly.api.problems import problem, unsupported_media_type
from workly.api.runtime import Runtime, get_runtime
from workly.api.schemas import TaskBatchIn, TaskIn, inline_json_schema
from workly.errors import TaskNotFound, TooLarge
from workly.models import QUEUE_NAME, TaskStatus

router = APIRouter(prefix="/v1", tags=["tasks"])
_TASK_BODY = {"required": True, "content": {"application/json": {"schema": inline_json_schema(TaskIn)}}}

QueuePath = Annotated[str, Path(pattern=f"^{QUEUE_NAME}$", max_length=128)]


def _task_id(task_id: Annotated[str, Path(max_length=64)]) -> str:
    # No task id holds NUL, and PostgreSQL text cannot: answer 404 here, not 500 there.
    if "\x00" in task_id:
        raise TaskNotFound(task_id)
    return task_id


TaskPath = Annotated[str, Depends(_task_id)]
Rt = Annotated[Runtime, Depends(get_runtime)]


@router.post(
    "/queues/{queue}/tasks",
    status_code=201,
    summary="Enqueue a task",
    openapi_extra={"requestBody": _TASK_BODY},
)
async def enqueue_task(
    queue: QueuePath,
    request: Request,
    rt: Rt,
    idempotency_key: Annotated[
        str | None, Header(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")
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
    if idempotency_key and task.idempotency_key and idempotency_key != task.idempotency_key:
        return problem(422, "The Idempotency-Key header and the idempotency_key field differ.")
    return await store_one(rt, queue, task, idempotency_key)


def check_body_sizes(tasks: list[TaskIn], limit: int) -> None:
    """TooLarge (413) for the first task whose body, as it would be sent, exceeds ``limit``."""
    for index, task in enumerate(tasks):
        size = len(task.encoded[1])
        if size > limit:
            where = "the task's" if len(tasks) == 1 else f"task {index}'s"
            raise TooLarge(f"{where} body is {size:,} bytes; at most {limit:,} (WORKLY_MAX_BODY_BYTES)")


async def store_one(rt: Runtime, queue: str, task: TaskIn, idempotency_key: str | None) -> JSONResponse:
    """Enqueue one validated task: 201 with the task, or 200 with the one its key matched."""
    check_body_sizes([task], rt.settings.max_body_bytes)
    [stored] = await rt.enqueuer.enqueue([rep.new_task(queue, task, rt.clock(), idempotency_key)])
    return JSONResponse(rep.task_json(stored.task), status_code=201 if stored.created else 200)


@router.post("/queues/{queue}/tasks/batch", status_code=201, summary="Enqueue up to 1,000 tasks at once")
async def enqueue_batch(queue: QueuePath, batch: TaskBatchIn, rt: Rt) -> JSONResponse:
    check_body_sizes(batch.tasks, rt.settings.max_body_bytes)
    now = rt.clock()
    stored = await rt.enqueuer.enqueue([rep.new_task(queue, task, now) for task in batch.tasks])
    return JSONResponse({"tasks": [rep.task_json(entry.task) for entry in stored]}, status_code=201)


Limit = Annotated[int, Query(ge=1, le=1000)]
Cursor = Annotated[str | None, Query(max_length=64)]


@router.get("/queues/{queue}/tasks", summary="List a queue's tasks, newest first")
async def list_tasks(
    queue: QueuePath, rt: Rt, status: TaskStatus | None = None, limit: Limit = 50, cursor: Cursor = None
) -> JSONResponse:
    return await _task_page(rt, queue, status, limit, cursor)


@router.get("/tasks", summary="List tasks of every queue (or of one), newest first")
async def list_all_tasks(
    rt: Rt,
    queue: Annotated[str | None, Query(pattern=f"^{QUEUE_NAME}$", max_length=128)] = None,
    status: TaskStatus | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> JSONResponse:
    return await _task_page(rt, queue, status, limit, cursor)


async def _task_page(
    rt: Runtime, queue: str | None, status: TaskStatus | None, limit: int, cursor: str | None
) -> JSONResponse:
    before = None
    if cursor is not None:
        try:
            before = rep.decode_cursor(cursor)
        except ValueError:
            return problem(400, "The cursor is invalid: pass next_cursor from a previous page.", "bad-cursor")
    tasks, next_seq = await rt.storage.list_tasks(queue, status, limit, before)
    return JSONResponse(
        {"tasks": [rep.task_json(task) for task in tasks], "next_cursor": rep.encode_cursor(next_seq)}
    )


@router.get("/tasks/{task_id}", summary="Get a task")
async def get_task(task_id: TaskPath, rt: Rt) -> JSONResponse:
    task = await rt.storage.get_task(task_id)
    if task is None:
        return problem(404, f"task {task_id!r} does not exist", "not-found")
    return JSONResponse(rep.task_json(task))


@router.get("/tasks/{task_id}/attempts", summary="List a task's attempts, oldest first")
async def list_attempts(task_id: TaskPath, rt: Rt) -> JSONResponse:
    attempts = await rt.storage.list_attempts(task_id)
    return JSONResponse({"attempts": [rep.attempt_json(attempt) for attempt in attempts]})


@router.post("/tasks/{task_id}/cancel", summary="Cancel a ready task")
async def cancel_task(task_id: TaskPath, rt: Rt) -> JSONResponse:
    return JSONResponse(rep.task_json(await rt.storage.cancel_task(task_id, rt.clock())))


@router.post("/tasks/{task_id}/retry", summary="Re-enqueue a failed or canceled task")
async def retry_task(task_id: TaskPath, rt: Rt) -> JSONResponse:
    task = await rt.storage.retry_task(task_id, rt.clock())
    rt.dispatcher.wake()
    return JSONResponse(rep.task_json(task))
