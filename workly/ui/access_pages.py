"""The dashboard's tenant and audit pages: tenants with their endpoint counts, a tenant with
its endpoints and recent events (its export, and its erasure for admins), and the audit log
(admins without a tenant only). Read through the same scoped service as the API: a tenant's
key sees its own tenant only.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from workly.audit import AuditFilter
from workly.errors import NotFoundError
from workly.ui.access import require_same_origin
from workly.ui.rendering import (
    PAGE_SIZE,
    back,
    error,
    form_value,
    older_link,
    page_start,
    render,
    unusable_form,
)
from workly.ui.webhook_pages import event_row, filter_text
from workly.web.access_representation import audit_json, tenant_json
from workly.web.dependencies import ServiceDep
from workly.web.export_lines import export_response
from workly.web.webhook_representation import endpoint_json

RECENT = 20  # events a tenant's page shows

router = APIRouter(prefix="/ui", include_in_schema=False, dependencies=[Depends(require_same_origin)])


@router.get("/tenants")
async def tenant_list(request: Request, service: ServiceDep, cursor: str | None = None) -> HTMLResponse:
    tenants, next_seq = await service.tenants.list_tenants(PAGE_SIZE, page_start(cursor))
    return render(
        request, "tenants.html", tenants=[tenant_json(t) for t in tenants],
        older=older_link("/ui/tenants", {}, next_seq),
    )  # fmt: skip


@router.get("/tenants/{tenant:path}/export")
async def tenant_export(request: Request, tenant: str, service: ServiceDep) -> Response:
    """The same JSON Lines as GET /v1/tenants/{tenant}/export, downloaded."""
    try:
        if filter_text(tenant) is None:
            raise NotFoundError(tenant)
        items = await service.tenants.export_tenant(tenant)
    except NotFoundError:
        return error(request, 404, "There is no such tenant.")
    return export_response(items)


@router.post("/tenants/{tenant:path}/erase")
async def tenant_erase(request: Request, tenant: str, service: ServiceDep) -> Response:
    """Erase the tenant once its id was typed again (a slip of the mouse erases nothing)."""
    typed = await form_value(request, "confirm")
    if typed is None:
        return unusable_form(request)
    if filter_text(tenant) is None:
        return error(request, 404, "There is no such tenant.")
    if typed != tenant:
        return error(request, 422, "Nothing was erased: type the tenant's id exactly to confirm the erasure.")
    try:
        operation = await service.tenants.erase_tenant(tenant)
    except NotFoundError:
        return error(request, 404, "There is no such tenant: it may have been erased already.")
    return back(f"/ui/operations/{operation.id}", "started")


@router.get("/tenants/{tenant:path}")  # a tenant may hold a "/"
async def tenant_page(request: Request, tenant: str, service: ServiceDep) -> HTMLResponse:
    try:
        if filter_text(tenant) is None:
            raise NotFoundError(tenant)
        found = await service.tenants.get_tenant(tenant)
        endpoints, _ = await service.webhooks.list_endpoints(tenant, PAGE_SIZE, None)
        events, _ = await service.webhooks.list_events(None, tenant, RECENT, None)
    except NotFoundError:
        return error(request, 404, "There is no such tenant.")
    return render(
        request, "tenant.html", tenant=tenant_json(found), endpoints=[endpoint_json(e) for e in endpoints],
        events=[event_row(e) for e in events],
    )  # fmt: skip


@router.get("/audit")
async def audit_page(
    request: Request,
    service: ServiceDep,
    actor: str | None = None,
    action: str | None = None,
    tenant: str | None = None,
    cursor: str | None = None,
) -> HTMLResponse:
    chosen = {
        name: filter_text(value) for name, value in (("actor", actor), ("action", action), ("tenant", tenant))
    }
    entries, next_seq = await service.audit.list_audit(
        AuditFilter(chosen["actor"], chosen["action"], chosen["tenant"]), PAGE_SIZE, page_start(cursor)
    )
    return render(
        request, "audit.html", entries=[audit_json(e) for e in entries], actor=chosen["actor"],
        action=chosen["action"], tenant=chosen["tenant"], older=older_link("/ui/audit", chosen, next_seq),
    )  # fmt: skip
