"""Schedule routes: a task or an event made by cron (docs/schedules.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import Response

from workly.api.pages import Cursor, Limit, page
from workly.api.schedule_schemas import ScheduleIn, SchedulePatchIn
from workly.errors import ScheduleNotFound
from workly.web.dependencies import ServiceDep
from workly.web.responses import JSONResponse
from workly.web.schedule_representation import schedule_json

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])


def _schedule_id(schedule_id: Annotated[str, Path(max_length=64)]) -> str:
    if "\x00" in schedule_id:
        raise ScheduleNotFound(schedule_id)
    return schedule_id


ScheduleId = Annotated[str, Depends(_schedule_id)]


@router.post("", status_code=201, summary="Create a schedule: a task or an event made by cron")
async def create_schedule(body: ScheduleIn, service: ServiceDep) -> JSONResponse:
    schedule = await service.schedules.create_schedule(body.spec())
    return JSONResponse(
        schedule_json(schedule), status_code=201, headers={"location": f"/v1/schedules/{schedule.id}"}
    )


@router.get("", summary="List schedules, newest first")
async def list_schedules(service: ServiceDep, limit: Limit = 50, cursor: Cursor = None) -> JSONResponse:
    return await page(
        "schedules", cursor, lambda before: service.schedules.list_schedules(limit, before), schedule_json
    )


@router.get("/{schedule_id}", summary="Get a schedule with its next runs")
async def get_schedule(schedule_id: ScheduleId, service: ServiceDep) -> JSONResponse:
    return JSONResponse(schedule_json(await service.schedules.get_schedule(schedule_id)))


@router.patch("/{schedule_id}", summary="Change some of a schedule's fields")
async def update_schedule(
    schedule_id: ScheduleId, body: SchedulePatchIn, service: ServiceDep
) -> JSONResponse:
    return JSONResponse(schedule_json(await service.schedules.update_schedule(schedule_id, body.changes())))


@router.delete("/{schedule_id}", status_code=204, summary="Delete a schedule (the tasks it made stay)")
async def delete_schedule(schedule_id: ScheduleId, service: ServiceDep) -> Response:
    await service.schedules.delete_schedule(schedule_id)
    return Response(status_code=204)


@router.post("/{schedule_id}/pause", summary="Stop firing (next_run_at becomes null)")
async def pause_schedule(schedule_id: ScheduleId, service: ServiceDep) -> JSONResponse:
    return JSONResponse(schedule_json(await service.schedules.pause_schedule(schedule_id)))


@router.post("/{schedule_id}/resume", summary="Fire again, from the next fire time after now")
async def resume_schedule(schedule_id: ScheduleId, service: ServiceDep) -> JSONResponse:
    return JSONResponse(schedule_json(await service.schedules.resume_schedule(schedule_id)))


@router.post("/{schedule_id}/trigger", summary="Fire once now (last_task_id or last_event_id: what it made)")
async def trigger_schedule(schedule_id: ScheduleId, service: ServiceDep) -> JSONResponse:
    return JSONResponse(schedule_json(await service.schedules.trigger_schedule(schedule_id)))
