"""The dashboard's pages and buttons: queues, a queue with its charts (charts.py), a task
list, a task with its attempts; and
``install_dashboard``, which adds these, the webhook pages (webhook_pages.py: endpoints and
events), the bulk operations (operation_pages.py), the schedules (schedule_pages.py), the
tenants and the audit log (access_pages.py), the event catalogue and an endpoint's routing
buttons (catalogue_pages.py) and the login page to the app.

Pages read and buttons change through the same service methods as the API; buttons are
plain form posts that redirect back (post/redirect/get), so the dashboard needs no JavaScript.
How a page is answered (templates, security headers, errors, paging) is rendering.py.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from workly.access import ANONYMOUS, BOOTSTRAP
from workly.api_keys import looks_like_key
from workly.errors import ConflictError, NotFoundError, PermissionDenied
from workly.models import TASK_STATUSES, TaskStatus, is_queue_name
from workly.service import Service
from workly.service.access import ScopedService
from workly.sessions import SESSION_SECONDS
from workly.ui import access_pages, catalogue_pages, operation_pages, schedule_pages, webhook_pages
from workly.ui.access import (
    LOGIN_PATH,
    ForeignForm,
    require_same_origin,
    safe_next,
    tokens_of,
)
from workly.ui.charts import charts_for
from workly.ui.rendering import (
    PAGE_SIZE,
    BrokenCursor,
    back,
    broken_cursor,
    could_be_id,
    error,
    older_link,
    page_start,
    render,
)
from workly.web import representation as rep
from workly.web.dependencies import ServiceDep
from workly.web.guards import SESSION_COOKIE
from workly.web.principals import audit_note_of, set_principal
from workly.web.problems import problem_for_exception
from workly.web.tokens import TokenSet
from workly.webhooks import ENDPOINT_PREFIX

THROUGHPUT_WINDOW = timedelta(seconds=60)
_STYLESHEET = Path(__file__).with_name("assets") / "workly.css"
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
    app.include_router(webhook_pages.router)
    app.include_router(operation_pages.router)
    app.include_router(schedule_pages.router)
    app.include_router(access_pages.router)
    app.include_router(catalogue_pages.router)
    app.add_exception_handler(ForeignForm, _foreign_form)
    # A dashboard page the caller's key may not see or use answers as a page (the API: a problem).
    app.add_exception_handler(PermissionDenied, _refused)
    app.add_exception_handler(NotFoundError, _refused)
    app.add_exception_handler(BrokenCursor, broken_cursor)


# --- pages -------------------------------------------------------------------------------


@pages.get("")
async def overview(request: Request, service: ServiceDep, done: str | None = None) -> Response:
    viewer = service.principal
    if viewer.tenant is not None or not viewer.can("read"):
        # Queues are no tenant's, and a publisher reads tasks and events only: where it can look.
        return RedirectResponse("/ui/endpoints" if viewer.can("read") else "/ui/events", status_code=303)
    queues = await service.queues.list_queues()
    delivered = await service.queues.delivered_in_last(THROUGHPUT_WINDOW)
    # An endpoint's queue is shown with the rest; it is enabled or disabled on its endpoint's page.
    endpoints = {q.name for q in queues if q.name.startswith(ENDPOINT_PREFIX)}
    return render(
        request, "overview.html", queues=[rep.queue_json(q) for q in queues], delivered=delivered,
        statuses=TASK_STATUSES, window=int(THROUGHPUT_WINDOW.total_seconds()), done=_DONE.get(done or ""),
        endpoints=endpoints,
    )  # fmt: skip


@pages.get("/queues/{name}")
async def queue_page(
    request: Request, name: str, service: ServiceDep, done: str | None = None
) -> HTMLResponse:
    try:
        if not is_queue_name(name):
            raise NotFoundError(name)
        queue = await service.queues.get_queue(name)
        minutes = await service.queues.delivery_history("queue", queue.name)
    except NotFoundError:
        return error(request, 404, "There is no such queue: it may have been deleted.")
    return render(
        request, "queue.html", queue=rep.queue_json(queue), statuses=TASK_STATUSES,
        charts=charts_for(minutes, service.now()), endpoint=queue.name.startswith(ENDPOINT_PREFIX),
        done=_DONE.get(done or ""),
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
    queues = await service.queues.list_queues()
    names = [q.name for q in queues]
    chosen_queue = queue if queue in names else None
    # A queue's page (this list, filtered to it) offers "Retry all failed" while it has any.
    failed = next((q.counts.get("failed", 0) for q in queues if q.name == chosen_queue), 0)
    chosen_status: TaskStatus | None = next((s for s in TASK_STATUSES if s == status), None)
    tasks, next_seq = await service.tasks.list_tasks(
        chosen_queue, chosen_status, PAGE_SIZE, page_start(cursor)
    )
    older = older_link("/ui/tasks", {"queue": chosen_queue, "status": chosen_status}, next_seq)
    return render(
        request, "tasks.html", tasks=[rep.task_json(t) for t in tasks], queues=names, statuses=TASK_STATUSES,
        queue=chosen_queue, status=chosen_status, older=older, failed=failed,
    )  # fmt: skip


@pages.get("/tasks/{task_id}")
async def task_page(
    request: Request, task_id: str, service: ServiceDep, done: str | None = None
) -> HTMLResponse:
    try:
        if not could_be_id(task_id):
            raise NotFoundError(task_id)
        task = await service.tasks.get_task(task_id)
        attempts = await service.tasks.list_attempts(task_id)
    except NotFoundError:
        return error(request, 404, "There is no such task: it may have been deleted by retention.")
    return render(
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


async def _change_task(request: Request, service: ScopedService, task_id: str, done: str) -> Response:
    if not could_be_id(task_id):
        return error(request, 404, "There is no such task.")
    change = service.tasks.retry_task if done == "retried" else service.tasks.cancel_task
    try:
        await change(task_id)
    except (NotFoundError, ConflictError) as exc:
        return error(request, 404 if isinstance(exc, NotFoundError) else 409, str(exc))
    return back(f"/ui/tasks/{task_id}", done)


# ?to=queue: the button was on the queue's page, which it returns to (else the overview).


@pages.post("/queues/{queue}/pause")
async def pause(request: Request, queue: str, service: ServiceDep, to: str | None = None) -> Response:
    return await _set_paused(request, service, queue, True, to == "queue")


@pages.post("/queues/{queue}/resume")
async def resume(request: Request, queue: str, service: ServiceDep, to: str | None = None) -> Response:
    return await _set_paused(request, service, queue, False, to == "queue")


async def _set_paused(
    request: Request, service: ScopedService, queue: str, paused: bool, to_queue: bool
) -> Response:
    if not is_queue_name(queue):
        return error(request, 404, "There is no such queue.")
    try:
        await (service.queues.pause_queue if paused else service.queues.resume_queue)(queue)
    except (NotFoundError, ConflictError) as exc:  # ConflictError: an endpoint's queue (enable it)
        return error(request, 404 if isinstance(exc, NotFoundError) else 409, str(exc))
    # Where to: the queue's page by its checked name, quoted, never a path the request names.
    return back(
        f"/ui/queues/{quote(queue, safe='')}" if to_queue else "/ui", "paused" if paused else "resumed"
    )


# --- login, logout, stylesheet (no session needed) -------------------------------------------


@public.get("/login")
async def login_page(request: Request, next: str | None = None) -> HTMLResponse:
    return render(request, "login.html", after=safe_next(next), failed=False)


@public.post("/login", dependencies=[Depends(require_same_origin)])
async def login(request: Request) -> Response:
    """A token or an API key typed in opens a session kept server-side (workly/sessions.py)."""
    try:
        form = parse_qs((await request.body()).decode(errors="replace"), max_num_fields=4)
    except ValueError:  # more fields than the form has
        return render(request, "login.html", code=400, after="/ui", failed=True)
    offered = (form.get("token") or [""])[0].strip()
    after = safe_next(form.get("next", [""])[0])
    service: Service = request.app.state.service
    token_digest = tokens_of(request).digest_of(offered) if offered else None
    found = BOOTSTRAP if token_digest is not None else None
    if found is None and looks_like_key(offered.encode()):
        found = await service.keys.authenticate(offered.encode())
    if found is None:  # a 401, counted as one the API answers (web/audit_trail.py)
        set_principal(request.scope, ANONYMOUS)  # not the browser's earlier session, if any
        return render(request, "login.html", code=401, after=after, failed=True)
    earlier = request.cookies.get(SESSION_COOKIE)
    if earlier is not None:  # logging in again ends the session the browser had
        await service.sessions.close(earlier)
    cookie = await service.sessions.open(found, token_digest)
    # Its audit entry names who logged in (web/audit_trail.py records it as the answer leaves).
    set_principal(request.scope, found)
    note = audit_note_of(request.scope)
    note.action, note.target, note.tenant = "session.login", found.key_id or "token", found.tenant
    response = RedirectResponse(after, status_code=303)
    response.set_cookie(
        SESSION_COOKIE, cookie, max_age=SESSION_SECONDS, path="/", httponly=True, samesite="strict",
        secure=request.url.scheme == "https",
    )  # fmt: skip
    return response


@public.post("/logout", dependencies=[Depends(require_same_origin)])
async def logout(request: Request) -> Response:
    """Ends the session server-side: its cookie opens nothing from now on, in any process
    within a second."""
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie is not None:
        service: Service = request.app.state.service
        await service.sessions.close(cookie)
    response = RedirectResponse(LOGIN_PATH, status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@public.get("/assets/workly.css")
async def stylesheet() -> Response:
    return Response(_STYLESHEET.read_bytes(), media_type="text/css", headers={"cache-control": "max-age=300"})


async def _refused(request: Request, exc: Exception) -> Response:
    if not request.url.path.startswith("/ui/") and request.url.path != "/ui":
        return problem_for_exception(request.scope, exc)
    if isinstance(exc, PermissionDenied):
        return error(request, 403, f"Your key cannot do this: {exc}")
    return error(request, 404, "There is no such page for your key.")


async def _foreign_form(request: Request, exc: Exception) -> Response:
    return error(request, 403, "This form was not sent from one of this server's pages, so it was refused.")
