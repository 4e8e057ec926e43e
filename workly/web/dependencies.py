"""How a route reaches the service: the app that serves it holds one (workly/app.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from workly.service import Service


async def get_service(request: Request) -> Service:
    # async on purpose: FastAPI runs a plain-def dependency in a worker thread, per request.
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]
