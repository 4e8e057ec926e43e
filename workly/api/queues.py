"""Queue routes: list, read, create/replace, update, delete, pause, resume, purge."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from workly.api.schemas import QueueConfigIn, QueuePatchIn, policy_tuples
from workly.models import QUEUE_NAME, QueueConfig
from workly.web import representation as rep
from workly.web.dependencies import ServiceDep
from workly.web.responses import JSONResponse

router = APIRouter(prefix="/v1/queues", tags=["queues"])

QueuePath = Annotated[str, Path(pattern=f"^{QUEUE_NAME}$", max_length=128)]


@router.get("", summary="List queues with their config and task counts")
async def list_queues(service: ServiceDep) -> JSONResponse:
    return JSONResponse({"queues": [rep.queue_json(queue) for queue in await service.queues.list_queues()]})


@router.get("/{queue}", summary="Get a queue")
async def get_queue(queue: QueuePath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(rep.queue_json(await service.queues.get_queue(queue)))


@router.get("/{queue}/public-key", summary="Read the public key(s) that verify its v1a signatures")
async def queue_public_key(queue: QueuePath, service: ServiceDep) -> JSONResponse:
    keys = await service.queues.queue_public_keys(queue)
    return JSONResponse({"public_key": keys[0], "public_keys": keys})


@router.put("/{queue}", summary="Create a queue or replace its config")
async def put_queue(queue: QueuePath, config: QueueConfigIn, service: ServiceDep) -> JSONResponse:
    stored, created = await service.queues.put_queue(queue, QueueConfig(**policy_tuples(config.model_dump())))
    return JSONResponse(rep.queue_json(stored), status_code=201 if created else 200)


@router.patch("/{queue}", summary="Change some of a queue's config")
async def patch_queue(queue: QueuePath, patch: QueuePatchIn, service: ServiceDep) -> JSONResponse:
    return JSONResponse(rep.queue_json(await service.queues.update_queue(queue, patch.changes())))


@router.delete("/{queue}", status_code=204, summary="Delete a queue with all its tasks")
async def delete_queue(queue: QueuePath, service: ServiceDep) -> Response:
    await service.queues.delete_queue(queue)
    return Response(status_code=204)


@router.post("/{queue}/pause", summary="Stop dispatching the queue's tasks")
async def pause_queue(queue: QueuePath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(rep.queue_json(await service.queues.pause_queue(queue)))


@router.post("/{queue}/resume", summary="Start dispatching the queue's tasks again")
async def resume_queue(queue: QueuePath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(rep.queue_json(await service.queues.resume_queue(queue)))


@router.post("/{queue}/purge", summary="Delete the queue's ready tasks")
async def purge_queue(queue: QueuePath, service: ServiceDep) -> JSONResponse:
    return JSONResponse({"purged": await service.queues.purge_queue(queue)})
