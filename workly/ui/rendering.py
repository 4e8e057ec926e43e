"""How every dashboard page is answered: Jinja templates (autoescaped), the security headers,
error pages, the post/redirect/get answer of a button, list paging and id checks.

Shared by the dashboard's page modules (pages.py: queues and tasks; webhook_pages.py:
endpoints and events), which never import each other's routes.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.templating import Jinja2Templates

from workly.ui.access import has_session, principal
from workly.web import representation as rep

PAGE_SIZE = 50
MAX_ID = 64  # no id is longer (the API's path limit)
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}


class BrokenCursor(Exception):
    """A page link whose cursor this dashboard did not hand out (answered 400)."""


@functools.cache
def _templates() -> Jinja2Templates:
    env = Environment(
        loader=PackageLoader("workly.ui"), autoescape=select_autoescape(), undefined=StrictUndefined
    )
    env.filters["when"] = when
    return Jinja2Templates(env=env)


def render(request: Request, template: str, code: int = 200, **context: Any) -> HTMLResponse:
    """``template`` with ``context``, and what every page shows by who is calling: buttons
    only for a role that may press them (``can_write``), the pages of objects of no tenant
    only for an untenanted principal (``untenanted``), keys and the audit log for admins."""
    viewer = principal(request)
    untenanted = viewer.tenant is None
    context = {
        "signed_in": has_session(request), "done": None, "can_write": viewer.can("write"),
        "untenanted": untenanted, "can_manage": untenanted and viewer.can("manage_access"),
        "viewer": viewer, **context,
    }  # fmt: skip
    response = _templates().TemplateResponse(request, template, context, status_code=code)
    response.headers.update(HEADERS)
    return response


def error(request: Request, status: int, message: str) -> HTMLResponse:
    return render(request, "error.html", code=status, message=message)


def when(value: str | None) -> str:
    """2026-11-30T09:10:06.972118Z → 2026-11-30 09:10:06 (times are UTC, as the page says)."""
    return "" if value is None else value.replace("T", " ").split(".")[0].removesuffix("Z")


def back(path: str, done: str) -> RedirectResponse:
    """A button's answer: back to ``path`` (a dashboard path, never taken from the request),
    which shows the notice named ``done``."""
    return RedirectResponse(f"{path}?{urlencode({'done': done})}", status_code=303)


def could_be_id(value: str) -> bool:
    # As the API's: no id is longer or holds NUL, which PostgreSQL text cannot (a 500 there).
    return len(value) <= MAX_ID and "\x00" not in value


def page_start(cursor: str | None) -> int | None:
    """The seq a list page continues before (None: the first page); BrokenCursor for a link
    this dashboard did not make."""
    if not cursor:
        return None
    try:
        return rep.decode_cursor(cursor[:MAX_ID])
    except ValueError:
        raise BrokenCursor from None


def link(path: str, query: dict[str, str | None]) -> str:
    """``path`` with the query parameters that have a value."""
    given = {k: v for k, v in query.items() if v}
    return f"{path}?{urlencode(given)}" if given else path


def older_link(path: str, filters: dict[str, str | None], next_seq: int | None) -> str | None:
    """The link to the next (older) page of a list, keeping its filters; None on the last page."""
    if next_seq is None:
        return None
    return link(path, {**filters, "cursor": rep.encode_cursor(next_seq)})


async def broken_cursor(request: Request, exc: Exception) -> HTMLResponse:
    return error(request, 400, "That page link is broken: start again from the first page.")


# The largest form of the dashboard: an endpoint's filter (8 KiB of compact JSON), shown
# indented and url-encoded (each quote three bytes).
MAX_FORM_BYTES = 128 * 1024


async def form_value(request: Request, name: str, default: str = "") -> str | None:
    """One field of a posted form (url-encoded, as every dashboard form is); None for a form
    larger than any of them, or with more fields: the button then changes nothing."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return None
    try:
        form = parse_qs(body.decode(errors="replace"), max_num_fields=4)
    except ValueError:
        return None
    return (form.get(name) or [default])[0]


def unusable_form(request: Request) -> HTMLResponse:
    return error(request, 413, "That form is larger than any of this dashboard's: nothing was changed.")
