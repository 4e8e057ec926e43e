"""Who may see the dashboard, and which form posts it accepts.

Without API tokens (`workly dev`) the dashboard is open, like the API (and, like it, answers
only to IP addresses and localhost: workly/web/browser_guards.py). With tokens, a request
needs ``Authorization: Bearer <token or key>`` or the session cookie the login page sets
(workly/sessions.py: kept server-side, expiring, ended by logging out, HttpOnly,
SameSite=Strict; it also opens the API reference at /docs, never the API); the guard in
front (workly/web/guards.py) decides that, and sends a browser without either to the login
page. The pages show what the caller's role and tenant allow (workly/access.py). Every form post
must come from a page of this server (its Origin), so another site cannot make a logged-in
browser press a button.
"""

from __future__ import annotations

from fastapi import Request

from workly.access import Principal
from workly.web.browser_guards import origin_names_host
from workly.web.guards import SESSION_COOKIE
from workly.web.principals import principal_of
from workly.web.tokens import TokenSet

LOGIN_PATH = "/ui/login"


class ForeignForm(Exception):
    """A form post that did not come from one of the dashboard's own pages."""


def tokens_of(request: Request) -> TokenSet:
    tokens: TokenSet = request.app.state.tokens
    return tokens


def has_session(request: Request) -> bool:
    """Logged in with the login page: a session cookie the guard took (it set who is calling)."""
    return SESSION_COOKIE in request.cookies and principal_of(request.scope).type != "anonymous"


def principal(request: Request) -> Principal:
    """Who is calling (workly/web/principals.py): what the pages show and which buttons."""
    return principal_of(request.scope)


async def require_same_origin(request: Request) -> None:
    """Form posts only from this server's pages: the Origin the browser sends must name the
    host the request was sent to (Chromium and Firefox send Origin with every form post)."""
    if request.method in ("GET", "HEAD"):
        return
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    if origin is None or host is None or origin == "null":
        raise ForeignForm
    if not origin_names_host(origin, host):
        raise ForeignForm


def safe_next(path: str | None) -> str:
    """Where to go after logging in: a dashboard page or the API reference, never another site."""
    if path is None or "\\" in path or any(ord(c) < 0x20 for c in path):
        return "/ui"
    return path if path in ("/ui", "/docs") or path.startswith(("/ui/", "/ui?")) else "/ui"
