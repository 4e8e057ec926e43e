"""The dashboard's schedule pages (cron that makes tasks or events): the list of schedules,
newest first, and a schedule's page, each showing what it makes, its next runs and its last
firing; the Pause, Resume, Trigger now and Delete buttons.

Like the other pages they read and change through the same service methods as the API
(/v1/schedules), and show the API's view of a schedule (schedule_representation.py). The
buttons are plain form posts, guarded like every dashboard form (access.require_same_origin,
and the app's outer guards), that redirect back. Names, URLs and event types are what API
clients wrote: the templates autoescape every one of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from workly.errors import ConflictError, InvalidSchedule, NotFoundError, TooLarge
from workly.schedules import Schedule
from workly.ui.access import require_same_origin
from workly.ui.rendering import PAGE_SIZE, back, could_be_id, error, older_link, page_start, render
from workly.web.dependencies import ServiceDep
from workly.web.schedule_representation import schedule_json

LIST_PATH = "/ui/schedules"
_MISSING = "There is no such schedule: it may have been deleted."
_DONE = {
    "paused": "Paused: it does not fire until you resume it (Trigger now still fires it once).",
    "resumed": "Resumed: it fires again from its next fire time after now.",
    "triggered": "Triggered: it fired once now; its next runs are unchanged.",
    "deleted": "Deleted. The tasks and events it made stay.",
}

router = APIRouter(
    prefix="/ui",
    include_in_schema=False,
    dependencies=[Depends(require_same_origin)],  # who may see /ui: the token guard (web/guards.py)
)


# --- pages -------------------------------------------------------------------------------------


@router.get("/schedules")
async def schedule_list(
    request: Request, service: ServiceDep, cursor: str | None = None, done: str | None = None
) -> HTMLResponse:
    schedules, next_seq = await service.schedules.list_schedules(PAGE_SIZE, page_start(cursor))
    return render(
        request, "schedules.html", schedules=[schedule_json(s) for s in schedules],
        older=older_link(LIST_PATH, {}, next_seq), done=_DONE.get(done or ""),
    )  # fmt: skip


@router.get("/schedules/{schedule_id}")
async def schedule_page(
    request: Request, schedule_id: str, service: ServiceDep, done: str | None = None
) -> HTMLResponse:
    try:
        if not could_be_id(schedule_id):
            raise NotFoundError(schedule_id)
        schedule = await service.schedules.get_schedule(schedule_id)
    except NotFoundError:
        return error(request, 404, _MISSING)
    return render(request, "schedule.html", schedule=schedule_json(schedule), done=_DONE.get(done or ""))


# --- buttons -----------------------------------------------------------------------------------
# Pressed twice (two tabs, a reload that posts again) each still answers: pausing a paused
# schedule changes nothing, and a second Delete finds no schedule (the 404 page says so).


@router.post("/schedules/{schedule_id}/pause")
async def pause(request: Request, schedule_id: str, service: ServiceDep) -> Response:
    return await _press(request, schedule_id, service.schedules.pause_schedule, "paused")


@router.post("/schedules/{schedule_id}/resume")
async def resume(request: Request, schedule_id: str, service: ServiceDep) -> Response:
    return await _press(request, schedule_id, service.schedules.resume_schedule, "resumed")


@router.post("/schedules/{schedule_id}/trigger")
async def trigger(request: Request, schedule_id: str, service: ServiceDep) -> Response:
    return await _press(request, schedule_id, service.schedules.trigger_schedule, "triggered")


@router.post("/schedules/{schedule_id}/delete")
async def delete(request: Request, schedule_id: str, service: ServiceDep) -> Response:
    return await _press(request, schedule_id, service.schedules.delete_schedule, "deleted")


async def _press(
    request: Request, schedule_id: str, change: Callable[[str], Awaitable[Schedule | None]], done: str
) -> Response:
    """Apply ``change`` to the schedule, then back to its page (to the list once deleted)."""
    if not could_be_id(schedule_id):
        return error(request, 404, _MISSING)
    try:
        changed = await change(schedule_id)
    except NotFoundError:
        return error(request, 404, _MISSING)
    except (ConflictError, InvalidSchedule, TooLarge) as exc:
        # A change that collided with a concurrent one, or a template the settings no longer
        # take (a lower WORKLY_MAX_BODY_BYTES): the page says why, as the API would.
        return error(request, 409, str(exc))
    # Where to: a path made here from the stored id, never one the request names.
    return back(LIST_PATH if changed is None else f"{LIST_PATH}/{changed.id}", done)
