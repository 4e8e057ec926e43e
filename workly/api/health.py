"""Health: live = the process answers; ready = the database answers AND the loop ticks.

Seed 001's zombie: an API that accepts work while its dispatcher loop is dead. Ready
asserts the loop, so an orchestrator pulls such a process.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from workly.metrics import CONTENT_TYPE
from workly.web.dependencies import ServiceDep
from workly.web.problems import problem
from workly.web.responses import JSONResponse

router = APIRouter(prefix="/health", tags=["health"])


@router.get("/live", summary="The process is up")
async def live() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/ready", summary="The database answers and the dispatcher loop is ticking")
async def ready(service: ServiceDep) -> JSONResponse:
    readiness = await service.readiness()
    if readiness.database_error is not None:
        detail = f"database unreachable: {readiness.database_error}"
        return problem(503, detail, "not-ready", checks={"database": "down"})
    if readiness.dispatcher == "down":
        return problem(503, "the dispatcher loop is not running", "not-ready", checks={"dispatcher": "down"})
    return JSONResponse({"status": "ok", "checks": {"database": "ok", "dispatcher": readiness.dispatcher}})


metrics_router = APIRouter(tags=["health"])


@metrics_router.get("/metrics", summary="Prometheus metrics, merged over the workers of workly serve")
async def metrics(service: ServiceDep) -> Response:
    # Under `workly serve --workers N` any worker answers, with the merged metrics of all of them.
    return Response(service.read_metrics().render(), media_type=CONTENT_TYPE)
