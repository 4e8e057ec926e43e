"""The API's outer guards, as ASGI wrappers: bearer tokens, then the request size limit.

Both answer before any route runs: an unauthenticated caller cannot make the server read
a body, and no body larger than the limit is ever held in memory whole.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from workly.api.problems import problem
from workly.api.request_body import BodyTooLarge, read_body, replay

_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})


class BearerTokens:
    """``Authorization: Bearer <token>`` with one of ``tokens``, compared in constant time
    (every token is compared, so the time does not tell which one nearly matched)."""

    def __init__(self, app: ASGIApp, tokens: list[str], public_paths: tuple[str, ...]) -> None:
        self._app = app
        self._tokens = [hashlib.sha256(token.encode()).digest() for token in tokens]
        self._public = public_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self._is_public(scope["path"]) or self._authorized(scope):
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket (none is served): closed, policy violation
            await send({"type": "websocket.close", "code": 1008})
            return
        response = problem(401, "Send a valid API token: Authorization: Bearer <token>.", "unauthorized")
        response.headers["www-authenticate"] = 'Bearer realm="workly"'
        await response(scope, receive, send)

    def _is_public(self, path: str) -> bool:
        return any(path == prefix or path.startswith(prefix.rstrip("/") + "/") for prefix in self._public)

    def _authorized(self, scope: Scope) -> bool:
        header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
        if header is None or header[:7].lower() != b"bearer ":
            return False
        # Digests of equal length: the comparison's time tells nothing, not even the length.
        offered = hashlib.sha256(header[7:].strip()).digest()
        matched = False
        for token in self._tokens:
            matched |= hmac.compare_digest(offered, token)
        return matched


class RequestSizeLimit:
    """Refuse (413) a request body over ``limit`` bytes: by its Content-Length before reading
    anything, or as soon as the bytes that arrive pass the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self._app = app
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _BODYLESS:
            await self._app(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self._limit:
            await self._too_large(scope, receive, send)
            return
        try:
            body = await read_body(receive, self._limit)
        except BodyTooLarge:
            await self._too_large(scope, receive, send)
            return
        if body is None:
            return  # the client went away mid-body: nothing to answer
        await self._app(scope, replay(body), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"The request body is larger than {self._limit:,} bytes (WORKLY_MAX_REQUEST_BYTES)."
        response = problem(413, detail, "too-large", limit=self._limit)
        response.headers["connection"] = "close"  # the rest of the body is not read
        await response(scope, receive, send)
