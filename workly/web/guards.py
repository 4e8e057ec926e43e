"""The API's outer guards, as ASGI wrappers: bearer tokens, then the request size limit.

Both answer before any route runs: an unauthenticated caller cannot make the server read
a body, and no body larger than the limit is ever held in memory whole.
"""

from __future__ import annotations

import contextlib
from http.cookies import CookieError, SimpleCookie
from urllib.parse import quote

from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from workly.access import ANONYMOUS, BOOTSTRAP, Principal
from workly.errors import StorageUnavailable
from workly.web.principals import (
    KeyLookup,
    SessionLookup,
    bearer_of,
    key_principal,
    session_principal,
    set_principal,
    unavailable,
)
from workly.web.problems import problem
from workly.web.request_body import BodyTooLarge, read_body, replay
from workly.web.tokens import TokenSet

_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
SESSION_COOKIE = "workly_session"  # set by the dashboard's login page
REFERENCE_PATHS = frozenset({"/docs", "/docs/swagger-init.js", "/openapi.json"})
REFERENCE_ASSETS = "/docs/assets"  # Swagger UI's files, served from the installed package
DASHBOARD_PUBLIC = ("/ui/login", "/ui/logout", "/ui/assets")
LOGIN_FORM_BYTES = 8192


class BearerTokens:
    """Every request but those to ``public_paths`` needs ``Authorization: Bearer <credential>``:
    one of WORKLY_API_TOKENS (an untenanted admin) or an API key (``keys`` looks it up); the
    request's principal is put in its scope (workly/web/principals.py).

    Browsers cannot send one, so the dashboard (/ui) and the API reference (/docs,
    /openapi.json) also open with the dashboard's session cookie (workly/sessions.py); a
    browser without either that asks for a page is sent to the login page. Only the login
    page, log out and the stylesheet are open to all. Both checks read headers only: no
    body is read before the caller is known."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenSet,
        public_paths: tuple[str, ...],
        keys: KeyLookup | None = None,
        sessions: SessionLookup | None = None,
    ) -> None:
        self._app = app
        self._tokens = tokens
        self._public = (*public_paths, *DASHBOARD_PUBLIC)
        self._keys = keys
        self._sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == "/ui/login" and _oversized_login(scope):
            # Anyone may post the login form: no more than a form's worth is read from them.
            detail = f"A login form is at most {LOGIN_FORM_BYTES:,} bytes, with its Content-Length."
            await problem(413, detail, "too-large", limit=LOGIN_FORM_BYTES)(scope, receive, send)
            return
        try:
            principal = await self._principal(scope)
        except StorageUnavailable:
            await unavailable(scope, receive, send)
            return
        if principal is None and self._open(scope):
            principal = ANONYMOUS
        if principal is not None:
            set_principal(scope, principal)
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket (none is served): closed, policy violation
            await send({"type": "websocket.close", "code": 1008})
            return
        path = scope["path"]
        if scope["method"] in ("GET", "HEAD") and (_is_under(path, ("/ui",)) or path == "/docs"):
            query = scope["query_string"].decode("latin-1")
            after = quote(path + (f"?{query}" if query else ""), safe="")
            await RedirectResponse(f"/ui/login?next={after}", status_code=303)(scope, receive, send)
            return
        response = problem(401, "Send a valid API key or token: Authorization: Bearer <key>.", "unauthorized")
        response.headers["www-authenticate"] = 'Bearer realm="workly"'
        await response(scope, receive, send)

    def _open(self, scope: Scope) -> bool:
        """A route anyone may reach (as nobody: it calls no use case)."""
        path = scope["path"]
        if path == "/" and scope["method"] in ("GET", "HEAD"):
            return True  # it only points to /ui, which asks for a token or a session itself
        return _is_under(path, self._public)

    async def _principal(self, scope: Scope) -> Principal | None:
        """Who sent the request: a token's or a key's bearer, or (for the dashboard and the
        API reference only) the dashboard's session; None: nobody known."""
        offered = bearer_of(scope["headers"])
        if offered is not None:
            if self._tokens.matches(offered):
                return BOOTSTRAP
            if self._keys is not None:
                return await key_principal(self._keys, offered)
            return None
        path = scope["path"]
        if not (_is_under(path, ("/ui", REFERENCE_ASSETS)) or path in REFERENCE_PATHS):
            return None
        cookie = session_cookie(scope["headers"])
        if cookie is None or self._sessions is None:
            return None
        return await session_principal(self._sessions, cookie)


def _oversized_login(scope: Scope) -> bool:
    if scope["method"] != "POST":
        return False
    declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
    return declared is None or not declared.isdigit() or int(declared) > LOGIN_FORM_BYTES


def session_cookie(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The dashboard's session cookie in the request's Cookie headers, if any."""
    for name, value in headers:
        if name == b"cookie":
            cookies: SimpleCookie = SimpleCookie()
            with contextlib.suppress(CookieError):
                cookies.load(value.decode("latin-1"))
            if SESSION_COOKIE in cookies:
                return cookies[SESSION_COOKIE].value
    return None


def _is_under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == prefix or path.startswith(prefix.rstrip("/") + "/") for prefix in prefixes)


# Routes anyone may reach without a token, with what they read at most: none needs more than a
# login form (a caller nobody knows must not make the server read a megabyte).
PUBLIC_PATHS = ("/health", "/metrics", "/ui/login", "/ui/logout", "/ui/assets")
PUBLIC_BODY_BYTES = LOGIN_FORM_BYTES


class RequestSizeLimit:
    """Refuse (413) a request body over ``limit`` bytes (``PUBLIC_BODY_BYTES`` on the
    ``PUBLIC_PATHS`` and ``/``): by its Content-Length before reading anything, or as soon as
    the bytes that arrive pass the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self._app = app
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _BODYLESS:
            await self._app(scope, receive, send)
            return
        public = scope["path"] == "/" or _is_under(scope["path"], PUBLIC_PATHS)
        limit = min(self._limit, PUBLIC_BODY_BYTES) if public else self._limit
        declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(limit, public, scope, receive, send)
            return
        try:
            body = await read_body(receive, limit)
        except BodyTooLarge:
            await _too_large(limit, public, scope, receive, send)
            return
        if body is None:
            return  # the client went away mid-body: nothing to answer
        await self._app(scope, replay(body), send)


async def _too_large(limit: int, public: bool, scope: Scope, receive: Receive, send: Send) -> None:
    why = "a route open without a token" if public else "WORKLY_MAX_REQUEST_BYTES"
    detail = f"The request body is larger than {limit:,} bytes ({why})."
    response = problem(413, detail, "too-large", limit=limit)
    response.headers["connection"] = "close"  # the rest of the body is not read
    await response(scope, receive, send)
