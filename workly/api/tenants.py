"""Tenant routes: create or replace, change, read, list (docs/tenants.md); erase and export
(docs/retention.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import StreamingResponse

from workly.api.access_schemas import TenantIn, TenantPatchIn
from workly.api.pages import Cursor, Limit, page
from workly.errors import TenantNotFound
from workly.web.access_representation import tenant_json
from workly.web.dependencies import ServiceDep
from workly.web.export_lines import JSONL, export_response
from workly.web.representation import operation_json
from workly.web.responses import JSONResponse

router = APIRouter(prefix="/v1/tenants", tags=["tenants"])


def _tenant(tenant: Annotated[str, Path(min_length=1, max_length=255)]) -> str:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in tenant):  # no tenant holds one: a 404
        raise TenantNotFound(tenant)
    return tenant


TenantPath = Annotated[str, Depends(_tenant)]


@router.get(
    "/{tenant:path}/export",
    summary="Export everything of a tenant as JSON Lines: endpoints (no secrets), events, tasks, attempts",
    response_class=StreamingResponse,
    responses={200: {"content": {JSONL: {}}, "description": 'One JSON object a line, each with its "kind"'}},
)
async def export_tenant(tenant: TenantPath, service: ServiceDep) -> StreamingResponse:
    return export_response(await service.tenants.export_tenant(tenant))


@router.put("/{tenant:path}", summary="Create a tenant or replace its fields")
async def put_tenant(tenant: TenantPath, body: TenantIn, service: ServiceDep) -> JSONResponse:
    stored, created = await service.tenants.put_tenant(tenant, body.spec())
    return JSONResponse(tenant_json(stored), status_code=201 if created else 200)


@router.patch("/{tenant:path}", summary="Change some of a tenant's fields")
async def patch_tenant(tenant: TenantPath, body: TenantPatchIn, service: ServiceDep) -> JSONResponse:
    return JSONResponse(tenant_json(await service.tenants.update_tenant(tenant, body.changes())))


@router.delete(
    "/{tenant:path}",
    status_code=202,
    summary="Erase a tenant: everything of it, in the background (an operation)",
    responses={202: {"description": "The erase operation; follow it at its location"}},
)
async def erase_tenant(tenant: TenantPath, service: ServiceDep) -> JSONResponse:
    operation = await service.tenants.erase_tenant(tenant)
    return JSONResponse(
        operation_json(operation), status_code=202, headers={"location": f"/v1/operations/{operation.id}"}
    )


@router.get("/{tenant:path}", summary="Get a tenant with its endpoint count")
async def get_tenant(tenant: TenantPath, service: ServiceDep) -> JSONResponse:
    return JSONResponse(tenant_json(await service.tenants.get_tenant(tenant)))


@router.get("", summary="List tenants, newest first")
async def list_tenants(service: ServiceDep, limit: Limit = 50, cursor: Cursor = None) -> JSONResponse:
    return await page(
        "tenants", cursor, lambda before: service.tenants.list_tenants(limit, before), tenant_json
    )
