"""The audit log route (docs/security.md): admins without a tenant only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AfterValidator, AwareDatetime

from workly.api.pages import Cursor, Limit, page
from workly.api.schemas import ShortText, check_run_at
from workly.audit import AuditFilter
from workly.web.access_representation import audit_json
from workly.web.dependencies import ServiceDep
from workly.web.responses import JSONResponse

router = APIRouter(prefix="/v1/audit", tags=["audit"])


def _since(value: datetime | None) -> datetime | None:
    return check_run_at(value, "since")


def _until(value: datetime | None) -> datetime | None:
    return check_run_at(value, "until")


@router.get("", summary="List audit log entries, newest first")
async def list_audit(
    service: ServiceDep,
    actor: Annotated[ShortText | None, Query(description="a key id, or token")] = None,
    action: Annotated[ShortText | None, Query(description="such as endpoint.update")] = None,
    tenant: Annotated[ShortText | None, Query()] = None,
    since: Annotated[AwareDatetime | None, Query(description="RFC 3339"), AfterValidator(_since)] = None,
    until: Annotated[AwareDatetime | None, Query(description="RFC 3339"), AfterValidator(_until)] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> JSONResponse:
    audit_filter = AuditFilter(actor, action, tenant, since, until)
    return await page(
        "entries", cursor, lambda before: service.audit.list_audit(audit_filter, limit, before), audit_json
    )
