"""The dashboard's pages and buttons: queues, a task list, a task with its attempts.

Pages read and buttons change through the same service methods as the API; buttons are
plain form posts that redirect back (post/redirect/get), so the dashboard needs no JavaScript.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.templating import Jinja2Templates

from workly.errors import ConflictError, NotFoundError
from workly.models import TASK_STATUSES, TaskStatus, is_queue_name
from workly.service import Service
from workly.ui.access import (
    LOGIN_PATH,
    ForeignForm,
    has_session,
    now_of,
    require_same_origin,
    safe_next,
    tokens_of,
)
from workly.web import representation as rep
from workly.web.dependencies import ServiceDep
from workly.web.guards import SESSION_COOKIE
from workly.web.tokens import SESSION_SECONDS, TokenSet

THROUGHPUT_WINDOW = timedelta(seconds=60)
PAGE_SIZE = 50
_STYLESHEET = Path(__file__).with_name("assets") / "workly.css"
_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}
_DONE = {
    "retried": "Re-enqueued: the task is due now.",
    "canceled": "Canceled.",
    "paused": "Paused: its tasks wait until you resume it.",
    "resumed": "Resumed.",
}

public = APIRouter(prefix="/ui", include_in_schema=False)
pages = APIRouter(
    prefix="/ui",
    include_in_schema=False,
    dependencies=[Depends(require_same_origin)],  # who may see /ui: the token guard (web/guards.py)
)


def install_dashboard(app: FastAPI, tokens: TokenSet) -> None:
    app.state.tokens = tokens
    app.include_router(public)
    app.include_router(pages)
    app.add_exception_handler(ForeignForm, _foreign_form)


@functools.cache
def _templates() -> Jinja2Templates:
    env = Environment(
        loader=PackageLoader("workly.ui"), autoescape=select_autoescape(), undefined=StrictUndefined
    )
    env.filters["when"] = _when
    return Jinja2Templates(env=env)


def _render(request: Request, template: str, code: int = 200, **context: Any) -> HTMLResponse:
    context = {"signed_in": has_session(request), "done": None, **context}
    response = _templates().TemplateResponse(request, template, context, status_code=code)
    response.headers.update(_HEADERS)
    return response


def _when(value: str | None) -> str:
    """2026-11-30T09:10:06.972118Z → 2026-11-30 09:10:06 (times are UTC, as the page says)."""
    return "" if value is None else value.replace("T", " ").split(".")[0].removesuffix("Z")


def _back(path: str, done: str) -> RedirectResponse:
    return RedirectResponse(f"{path}?{urlencode({'done': done})}", status_code=303)


# --- pages -------------------------------------------------------------------------------


@pages.get("")
async def overview(request: Request, service: ServiceDep, done: str | None = None) -> HTMLResponse:
    queues = await service.list_queues()
    delivered = await service.delivered_in_last(THROUGHPUT_WINDOW)
    return _render(
        request, "overview.html", queues=[rep.queue_json(q) for q in queues], delivered=delivered,
        statuses=TASK_STATUSES, window=int(THROUGHPUT_WINDOW.total_seconds()), done=_DONE.get(done or ""),
    )  # fmt: skip


@pages.get("/tasks")
async def task_list(
    request: Request,
    service: ServiceDep,
    queue: str | None = None,
    status: str | None = None,
    cursor: str | None = None,
) -> HTMLResponse:
    # Filters come from the page's own form and links: anything else lists every task.
    names = [q.name for q in await service.list_queues()]
    chosen_queue = queue if queue in names else None
    chosen_status: TaskStatus | None = next((s for s in TASK_STATUSES if s == status), None)
    before = None
    if cursor:
        try:
            before = rep.decode_cursor(cursor[:64])
        except ValueError:
            return _error(request, 400, "That page link is broken: start again from the first page.")
    tasks, next_seq = await service.list_tasks(chosen_queue, chosen_status, PAGE_SIZE, before)
    older = None
    if next_seq is not None:
        filters = {"queue": chosen_queue, "status": chosen_status, "cursor": rep.encode_cursor(next_seq)}
        older = "/ui/tasks?" + urlencode({k: v for k, v in filters.items() if v})
    return _render(
        request, "tasks.html", tasks=[rep.task_json(t) for t in tasks], queues=names, statuses=TASK_STATUSES,
        queue=chosen_queue, status=chosen_status, older=older,
    )  # fmt: skip


@pages.get("/tasks/{task_id}")
async def task_page(
    request: Request, task_id: str, service: ServiceDep, done: str | None = None
) -> HTMLResponse:
    try:
        if not _could_be_task_id(task_id):
            raise NotFoundError(task_id)
        task = await service.get_task(task_id)
        attempts = await service.list_attempts(task_id)
    except NotFoundError:
        return _error(request, 404, "There is no such task: it may have been deleted by retention.")
    return _render(
        request, "task.html", task=rep.task_json(task), attempts=[rep.attempt_json(a) for a in attempts],
        done=_DONE.get(done or ""),
    )  # fmt: skip


# --- buttons -------------------------------------------------------------------------------


@pages.post("/tasks/{task_id}/retry")
async def retry(request: Request, task_id: str, service: ServiceDep) -> Response:
    return await _change_task(request, service, task_id, "retried")


@pages.post("/tasks/{task_id}/cancel")
async def cancel(request: Request, task_id: str, service: ServiceDep) -> Response:
    return await _change_task(request, service, task_id, "canceled")


async def _change_task(request: Request, service: Service, task_id: str, done: str) -> Response:
    if not _could_be_task_id(task_id):
        return _error(request, 404, "There is no such task.")
    change = service.retry_task if done == "retried" else service.cancel_task
    try:
        await change(task_id)
    except (NotFoundError, ConflictError) as exc:
        return _error(request, 404 if isinstance(exc, NotFoundError) else 409, str(exc))
    return _back(f"/ui/tasks/{task_id}", done)


@pages.post("/queues/{queue}/pause")
async def pause(request: Request, queue: str, service: ServiceDep) -> Response:
    return await _set_paused(request, service, queue, True)


@pages.post("/queues/{queue}/resume")
async def resume(request: Request, queue: str, service: ServiceDep) -> Response:
    return await _set_paused(request, service, queue, False)


async def _set_paused(request: Request, service: Service, queue: str, paused: bool) -> Response:
    if not is_queue_name(queue):
        return _error(request, 404, "There is no such queue.")
    try:
        await (service.pause_queue if paused else service.resume_queue)(queue)
    except NotFoundError as exc:
        return _error(request, 404, str(exc))
    return _back("/ui", "paused" if paused else "resumed")


def _could_be_task_id(task_id: str) -> bool:
    # As the API's: no id is longer or holds NUL, which PostgreSQL text cannot (a 500 there).
    return len(task_id) <= 64 and "\x00" not in task_id


def _error(request: Request, status: int, message: str) -> HTMLResponse:
    return _render(request, "error.html", code=status, message=message)


# --- login, logout, stylesheet (no session needed) -------------------------------------------


@public.get("/login")
async def login_page(request: Request, next: str | None = None) -> HTMLResponse:
    return _render(request, "login.html", after=safe_next(next), failed=False)


@public.post("/login", dependencies=[Depends(require_same_origin)])
async def login(request: Request) -> Response:
    try:
        form = parse_qs((await request.body()).decode(errors="replace"), max_num_fields=4)
    except ValueError:  # more fields than the form has
        return _render(request, "login.html", code=400, after="/ui", failed=True)
    offered = (form.get("token") or [""])[0]
    after = safe_next(form.get("next", [""])[0])
    session = tokens_of(request).session_for(offered, now_of(request)) if offered else None
    if session is None:
        return _render(request, "login.html", code=401, after=after, failed=True)
    response = RedirectResponse(after, status_code=303)
    response.set_cookie(
        SESSION_COOKIE, session, max_age=SESSION_SECONDS, path="/", httponly=True, samesite="strict",
        secure=request.url.scheme == "https",
    )  # fmt: skip
    return response


@public.post("/logout", dependencies=[Depends(require_same_origin)])
async def logout() -> Response:
    response = RedirectResponse(LOGIN_PATH, status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@public.get("/assets/workly.css")
async def stylesheet() -> Response:
    return Response(_STYLESHEET.read_bytes(), media_type="text/css", headers={"cache-control": "max-age=300"})


async def _foreign_form(request: Request, exc: Exception) -> Response:
    return _error(request, 403, "This form was not sent from one of this server's pages, so it was refused.")
