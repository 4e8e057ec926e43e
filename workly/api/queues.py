"""Queue routes: list, read, create/replace, update, delete, pause, resume, purge."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import JSONResponse

from workly.api import representation as rep
from workly.api.problems import problem
from workly.api.runtime import Runtime, get_runtime
from workly.api.schemas import QueueConfigIn, QueuePatchIn
from workly.models import QUEUE_NAME, QueueConfig, check_queue_config

router = APIRouter(prefix="/v1/queues", tags=["queues"])

QueuePath = Annotated[str, Path(pattern=f"^{QUEUE_NAME}$", max_length=128)]
Rt = Annotated[Runtime, Depends(get_runtime)]


@router.get("", summary="List queues with their config and task counts")
async def list_queues(rt: Rt) -> JSONResponse:
    return JSONResponse({"queues": [rep.queue_json(queue) for queue in await rt.storage.list_queues()]})


@router.get("/{queue}", summary="Get a queue")
async def get_queue(queue: QueuePath, rt: Rt) -> JSONResponse:
    found = await rt.storage.get_queue(queue)
    if found is None:
        return problem(404, f"queue {queue!r} does not exist", "not-found")
    return JSONResponse(rep.queue_json(found))


@router.put("/{queue}", summary="Create a queue or replace its config")
async def put_queue(queue: QueuePath, config: QueueConfigIn, rt: Rt) -> JSONResponse:
    wanted = check_queue_config(QueueConfig(**config.model_dump()))
    stored, created = await rt.storage.put_queue(queue, wanted, rt.clock())
    rt.dispatcher.wake()
    return JSONResponse(rep.queue_json(stored), status_code=201 if created else 200)


@router.patch("/{queue}", summary="Change some of a queue's config")
async def patch_queue(queue: QueuePath, patch: QueuePatchIn, rt: Rt) -> JSONResponse:
    stored = await rt.storage.update_queue(queue, patch.changes(), rt.clock())
    rt.dispatcher.wake()
    return JSONResponse(rep.queue_json(stored))


@router.delete("/{queue}", status_code=204, summary="Delete a queue with all its tasks")
async def delete_queue(queue: QueuePath, rt: Rt) -> Response:
    await rt.storage.delete_queue(queue)
    return Response(status_code=204)


@router.post("/{queue}/pause", summary="Stop dispatching the queue's tasks")
async def pause_queue(queue: QueuePath, rt: Rt) -> JSONResponse:
    return JSONResponse(rep.queue_json(await rt.storage.update_queue(queue, {"paused": True}, rt.clock())))


@router.post("/{queue}/resume", summary="Start dispatching the queue's tasks again")
async def resume_queue(queue: QueuePath, rt: Rt) -> JSONResponse:
    stored = await rt.storage.update_queue(queue, {"paused": False}, rt.clock())
    rt.dispatcher.wake()
    return JSONResponse(rep.queue_json(stored))


@router.post("/{queue}/purge", summary="Delete the queue's ready tasks")
async def purge_queue(queue: QueuePath, rt: Rt) -> JSONResponse:
    return JSONResponse({"purged": await rt.storage.purge_queue(queue)})
