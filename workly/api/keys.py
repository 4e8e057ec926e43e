"""API key routes: create (the key shown once), list, read, revoke (docs/security.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from workly.api.access_schemas import KeyIn
from workly.api.pages import Cursor, Limit, page
from workly.web.access_representation import key_json
from workly.web.dependencies import ServiceDep
from workly.web.responses import JSONResponse

router = APIRouter(prefix="/v1/keys", tags=["keys"])
KeyPath = Annotated[str, Path(max_length=64, pattern=r"^key_[0-9A-Za-z]+$")]


@router.post("", status_code=201, summary="Create an API key: the key is in this answer only")
async def create_key(body: KeyIn, service: ServiceDep) -> JSONResponse:
    key, secret = await service.keys.create_key(body.spec())
    return JSONResponse(key_json(key, secret), status_code=201)


@router.get("", summary="List API keys, newest first (never the keys themselves)")
async def list_keys(service: ServiceDep, limit: Limit = 50, cursor: Cursor = None) -> JSONResponse:
    return await page("keys", cursor, lambda before: service.keys.list_keys(limit, before), key_json)


@router.get("/{key_id}", summary="Get an API key's fields (never the key itself)")
async def get_key(key_id: KeyPath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(key_json(await service.keys.get_key(key_id)))


@router.delete("/{key_id}", status_code=204, summary="Revoke an API key, in every process within a second")
async def revoke_key(key_id: KeyPath, service: ServiceDep) -> Response:
    await service.keys.revoke_key(key_id)
    return Response(status_code=204)
