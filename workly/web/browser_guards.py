"""Guards against what a web page in someone's browser could make that browser send.

A page on another site can post a plain form to any address the browser reaches (no
preflight, no token needed when the server has none), and a name that the attacker's DNS
points at 127.0.0.1 (DNS rebinding) makes a local server look same-origin to that page.
Both guards read headers only; API clients (curl, SDKs) send neither an Origin nor a
browser's Sec-Fetch-Site, and pass.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from workly.web.problems import problem

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class SameOriginWrites:
    """Refuse (403) a write a browser sends from another site: an Origin that does not name
    this server, or Sec-Fetch-Site saying another site. Every server, tokens or not."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _SAFE_METHODS or _same_site(scope):
            await self._app(scope, receive, send)
            return
        detail = "A browser sent this from a page of another site; it was refused and changed nothing."
        await problem(403, detail, "cross-site")(scope, receive, send)


def _same_site(scope: Scope) -> bool:
    origin = host = None
    for name, value in scope["headers"]:  # one pass, no dict: this runs on every enqueue
        if name == b"origin":
            origin = value
        elif name == b"host":
            host = value
        elif name == b"sec-fetch-site" and value.lower() in (b"cross-site", b"same-site"):
            return False
    if origin is None:
        return True  # not a browser's cross-origin request (browsers send Origin with those)
    return origin_names_host(origin.decode("latin-1"), (host or b"").decode("latin-1"))


def origin_names_host(origin: str, host: str) -> bool:
    """Whether a browser's Origin header names the host (Host header) the request went to."""
    try:
        parts = urlsplit(origin)
    except ValueError:  # "http://[::1": no origin a browser sends
        return False
    return parts.scheme in ("http", "https") and parts.netloc == host


class LocalHostsOnly:
    """Without API tokens (`workly dev`), answer only requests addressed to an IP address or
    localhost: a DNS name may be an attacker's that points at this machine (DNS rebinding),
    which would give their page this server's API and dashboard."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._local: set[str | None] = set()  # Host values seen to be local: a few, kept

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self._is_local(_host_header(scope)):
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        detail = (
            "Without API tokens this server answers only to IP addresses and localhost, not to "
            "other names (DNS rebinding): use its address, or set WORKLY_API_TOKENS."
        )
        await problem(403, detail, "host-not-allowed")(scope, receive, send)

    def _is_local(self, host: str | None) -> bool:
        if host in self._local:
            return True
        if not is_local_host(host):
            return False
        if len(self._local) < 64:
            self._local.add(host)
        return True


def _host_header(scope: Scope) -> str | None:
    value = next((v for name, v in scope["headers"] if name == b"host"), None)
    return None if value is None else value.decode("latin-1")


def is_local_host(host: str | None) -> bool:
    """Host header → whether it names an IP address or localhost (no Host: HTTP/1.0, fine)."""
    if host is None:
        return True
    try:
        name = urlsplit(f"//{host}").hostname
    except ValueError:  # "[::1": an unclosed bracket
        return False
    if name is None:
        return False
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
