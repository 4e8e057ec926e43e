"""Health: live = the process answers; ready = the database answers AND the loop ticks.

Seed 001's zombie: an API that accepts work while its dispatcher loop is dead. Ready
asserts the loop, so an orchestrator pulls such a process.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response

from workly.api.problems import problem
from workly.api.runtime import Runtime, get_runtime
from workly.metrics import CONTENT_TYPE

router = APIRouter(prefix="/health", tags=["health"])
Rt = Annotated[Runtime, Depends(get_runtime)]


@router.get("/live", summary="The process is up")
async def live() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/ready", summary="The database answers and the dispatcher loop is ticking")
async def ready(rt: Rt) -> JSONResponse:
    try:
        await asyncio.wait_for(rt.storage.ping(), timeout=2)
    except Exception as exc:
        return problem(
            503, f"database unreachable: {type(exc).__name__}", "not-ready", checks={"database": "down"}
        )
    if rt.settings.dispatch and not rt.dispatcher.alive(rt.settings.ready_stall_seconds):
        return problem(503, "the dispatcher loop is not running", "not-ready", checks={"dispatcher": "down"})
    dispatcher = "ok" if rt.settings.dispatch else "disabled"
    return JSONResponse({"status": "ok", "checks": {"database": "ok", "dispatcher": dispatcher}})


metrics_router = APIRouter(tags=["health"])


@metrics_router.get("/metrics", summary="Prometheus metrics, merged over the workers of workly serve")
async def metrics(rt: Rt) -> Response:
    # Under `workly serve --workers N` any worker answers, with the merged metrics of all of them.
    return Response(rt.metrics.render(), media_type=CONTENT_TYPE)
