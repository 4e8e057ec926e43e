"""How a route reaches the service: the app that serves it holds one (workly/app.py), and
each request calls it as the principal the guards found (workly/web/principals.py), through
the service's access layer (workly/service/access)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from workly.service import Service
from workly.service.access import ScopedService
from workly.web.principals import audit_note_of, principal_of


async def get_service(request: Request) -> ScopedService:
    # async on purpose: FastAPI runs a plain-def dependency in a worker thread, per request.
    service: Service = request.app.state.service
    return service.scoped(principal_of(request.scope), audit_note_of(request.scope))


ServiceDep = Annotated[ScopedService, Depends(get_service)]
