"""Endpoint routes: create, list, read, change, delete, secret, enable/disable/recover,
and an endpoint's delivery tasks (docs/webhooks.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response

from workly.api.pages import Cursor, Limit, page
from workly.api.schemas import ShortText
from workly.api.webhook_schemas import EndpointIn, EndpointPatchIn, RecoverIn, ReplayIn, TestIn
from workly.errors import EndpointNotFound
from workly.models import TaskStatus
from workly.web import representation as rep
from workly.web.dependencies import ServiceDep
from workly.web.responses import JSONResponse
from workly.web.webhook_representation import endpoint_json

router = APIRouter(prefix="/v1/endpoints", tags=["endpoints"])


def _endpoint_id(endpoint_id: Annotated[str, Path(max_length=64)]) -> str:
    if "\x00" in endpoint_id:  # no id holds NUL, and PostgreSQL text cannot: a 404 here
        raise EndpointNotFound(endpoint_id)
    return endpoint_id


EndpointPath = Annotated[str, Depends(_endpoint_id)]


@router.post("", status_code=201, summary="Register an endpoint")
async def create_endpoint(endpoint: EndpointIn, service: ServiceDep) -> JSONResponse:
    return JSONResponse(
        endpoint_json(await service.webhooks.create_endpoint(endpoint.spec())), status_code=201
    )


@router.get("", summary="List endpoints, newest first")
async def list_endpoints(
    service: ServiceDep,
    tenant: Annotated[ShortText | None, Query()] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> JSONResponse:
    return await page(
        "endpoints",
        cursor,
        lambda before: service.webhooks.list_endpoints(tenant, limit, before),
        endpoint_json,
    )


@router.get("/{endpoint_id}", summary="Get an endpoint with its health")
async def get_endpoint(endpoint_id: EndpointPath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(endpoint_json(await service.webhooks.get_endpoint(endpoint_id)))


@router.patch("/{endpoint_id}", summary="Change some of an endpoint's fields")
async def patch_endpoint(
    endpoint_id: EndpointPath, patch: EndpointPatchIn, service: ServiceDep
) -> JSONResponse:
    return JSONResponse(endpoint_json(await service.webhooks.update_endpoint(endpoint_id, patch.changes())))


@router.delete("/{endpoint_id}", status_code=204, summary="Delete an endpoint with its pending tasks")
async def delete_endpoint(endpoint_id: EndpointPath, service: ServiceDep) -> Response:
    await service.webhooks.delete_endpoint(endpoint_id)
    return Response(status_code=204)


@router.get("/{endpoint_id}/secret", summary="Read an endpoint's signing secret(s)")
async def endpoint_secret(endpoint_id: EndpointPath, service: ServiceDep) -> JSONResponse:
    return JSONResponse({"signing_secret": await service.webhooks.endpoint_secret(endpoint_id)})


@router.get("/{endpoint_id}/public-key", summary="Read the public key(s) that verify its v1a signatures")
async def endpoint_public_key(endpoint_id: EndpointPath, service: ServiceDep) -> JSONResponse:
    keys = await service.webhooks.endpoint_public_keys(endpoint_id)
    return JSONResponse({"public_key": keys[0], "public_keys": keys})


@router.post("/{endpoint_id}/enable", summary="Enable an endpoint: its held tasks flow again")
async def enable_endpoint(endpoint_id: EndpointPath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(endpoint_json(await service.webhooks.enable_endpoint(endpoint_id)))


@router.post("/{endpoint_id}/disable", summary="Disable an endpoint: no new events, its pending tasks held")
async def disable_endpoint(endpoint_id: EndpointPath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(endpoint_json(await service.webhooks.disable_endpoint(endpoint_id)))


@router.post("/{endpoint_id}/recover", summary="Re-enqueue the endpoint's tasks that failed since a time")
async def recover_endpoint(
    endpoint_id: EndpointPath, recover: RecoverIn, service: ServiceDep
) -> JSONResponse:
    recovered = await service.webhooks.recover_endpoint(endpoint_id, recover.since)
    return JSONResponse({"recovered": recovered})


_REFUSALS: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such endpoint"},
    422: {"description": "Invalid input"},
}


@router.post(
    "/{endpoint_id}/replay",
    status_code=202,
    summary="Deliver the events the endpoint missed since a time",
    responses=_REFUSALS,
)
async def replay_endpoint(endpoint_id: EndpointPath, replay: ReplayIn, service: ServiceDep) -> JSONResponse:
    operation = await service.webhooks.replay_endpoint(endpoint_id, replay.since)
    return JSONResponse(rep.operation_json(operation), status_code=202)


@router.post(
    "/{endpoint_id}/test",
    status_code=202,
    summary="Send the endpoint a test event",
    responses={**_REFUSALS, 409: {"description": "The endpoint is disabled"}},
)
async def send_test(
    endpoint_id: EndpointPath, service: ServiceDep, body: TestIn | None = None
) -> JSONResponse:
    task = await service.webhooks.send_test(endpoint_id, None if body is None else body.type)
    return JSONResponse(rep.task_json(task), status_code=202)


@router.get("/{endpoint_id}/tasks", summary="List an endpoint's delivery tasks, newest first")
async def list_endpoint_tasks(
    endpoint_id: EndpointPath,
    service: ServiceDep,
    status: TaskStatus | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> JSONResponse:
    return await page(
        "tasks",
        cursor,
        lambda before: service.webhooks.list_endpoint_tasks(endpoint_id, status, limit, before),
        rep.task_json,
    )
