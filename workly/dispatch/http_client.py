"""The HTTP/1.1 client deliveries go through: small, keep-alive, and cheap per request.

A delivery needs one request and, of the answer, the status, a few headers and the
first bytes of the body. With aiohttp a request cost 121 µs of CPU and deliveries were
a third of the server's CPU at 1,500 tasks/s; with this client, 45 µs (both counting
the receiving end's share: tools/bench/http_clients.py, docs/performance.md).

It parses with httptools (the parser uvicorn uses) and keeps idle connections per
origin. By design it follows no redirects, reads no proxy settings, keeps no cookies,
asks for no compression and decompresses nothing, reads at most ``max_body`` bytes of a
response (a longer one closes its connection instead of being drained) and at most
64 KiB of response headers. Before connecting it resolves the host once and checks every
address against the outbound policy (workly/outbound.py), then connects only to those.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import httptools
from yarl import URL

from workly.outbound import BlockedTarget, OutboundPolicy
from workly.outgoing import CONNECTION_HEADERS, request_target

_BODYLESS_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
MAX_RESPONSE_HEADER_BYTES = 64 * 1024

# host, port → the addresses it resolves to, in the order to try them.
Resolver = Callable[[str, int], Awaitable[list[str]]]


class HttpError(Exception):
    """No usable HTTP response arrived."""


class ConnectError(HttpError):
    """The connection (TCP or TLS) could not be made."""


class ProtocolError(HttpError):
    """The peer did not speak HTTP/1.x, or closed before answering."""


class Blocked(HttpError):
    """The outbound policy refuses the target's address: nothing was sent."""


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes  # at most max_body bytes


class HttpClient:
    def __init__(
        self,
        max_body: int = 2048,
        max_idle_per_origin: int = 64,
        idle_timeout: float = 15.0,
        ssl_context: ssl.SSLContext | None = None,
        policy: OutboundPolicy | None = None,
        resolver: Resolver = system_resolver,
        connect_timeout: float = 10.0,
    ) -> None:
        """``policy``: the addresses deliveries may reach; by default public ones only."""
        self._policy = policy or OutboundPolicy()
        self._resolve = resolver
        self._connect_timeout = connect_timeout
        self._max_body = max_body
        self._max_idle = max_idle_per_origin
        self._idle_timeout = idle_timeout
        self._ssl = ssl_context or ssl.create_default_context()
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, max_body: int | None = None
    ) -> HttpResponse:
        """Send one request; bound it with ``asyncio.timeout`` (a cancelled exchange
        closes its connection, so nothing half-read is ever reused). ``max_body``: response
        bytes to keep for this request (default: the client's)."""
        target = request_target(url)
        if target.scheme not in ("http", "https") or not target.raw_host or target.port is None:
            raise ProtocolError(f"not an absolute http(s) URL: {url!r}")
        origin = (target.scheme, target.raw_host, target.port)
        message = _encode_request(method, target, headers, body)
        return await self._exchange(
            origin, message, method == "HEAD", self._max_body if max_body is None else max_body
        )

    async def _exchange(
        self, origin: tuple[str, str, int], message: bytes, head: bool, max_body: int
    ) -> HttpResponse:
        conn = self._take_idle(origin)
        if conn is not None:
            try:
                return await self._send(origin, conn, message, head, max_body)
            except _StaleConnection:
                pass  # the server closed it while idle, before reading this request: retry fresh
        conn = await self._connect(origin)
        try:
            return await self._send(origin, conn, message, head, max_body)
        except _StaleConnection:
            raise ProtocolError("the server closed the connection without answering") from None

    async def _send(
        self, origin: tuple[str, str, int], conn: _Connection, message: bytes, head: bool, max_body: int
    ) -> HttpResponse:
        try:
            response = await conn.exchange(message, head, max_body)
        except BaseException:
            conn.close()  # a timeout or error mid-exchange leaves the connection unusable
            raise
        if conn.reusable:
            self._put_idle(origin, conn)
        else:
            conn.close()
        return response

    async def _connect(self, origin: tuple[str, str, int]) -> _Connection:
        scheme, host, port = origin
        try:
            async with asyncio.timeout(self._connect_timeout):
                return await self._connect_checked(scheme, host, port)
        except TimeoutError:
            raise ConnectError(f"no connection to {host}:{port} within {self._connect_timeout:g}s") from None

    async def _connect_checked(self, scheme: str, host: str, port: int) -> _Connection:
        try:
            resolved = await self._resolve(host, port)
        except OSError as exc:
            raise ConnectError(f"cannot resolve {host}: {exc}") from None
        try:
            addresses = self._policy.check(host, resolved)
        except BlockedTarget as exc:
            raise Blocked(str(exc)) from None
        loop = asyncio.get_running_loop()
        tls = self._ssl if scheme == "https" else None
        failure: Exception | None = None
        for address in addresses:  # the checked addresses only: no second lookup
            try:
                _, conn = await loop.create_connection(
                    _Connection, address, port, ssl=tls, server_hostname=host if tls else None
                )
            except (OSError, ssl.SSLError) as exc:
                failure = exc
                continue
            return conn
        raise ConnectError(f"connection to {host}:{port} failed: {failure}")

    def _take_idle(self, origin: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.usable and now - conn.idle_since < self._idle_timeout:
                return conn
            conn.close()
        self._idle.pop(origin, None)
        return None

    def _put_idle(self, origin: tuple[str, str, int], conn: _Connection) -> None:
        idle = self._idle.setdefault(origin, [])
        now = time.monotonic()
        while idle and (now - idle[0].idle_since >= self._idle_timeout or not idle[0].usable):
            idle.pop(0).close()  # the oldest first: idle connections do not pile up
        if len(idle) >= self._max_idle:
            conn.close()
            return
        conn.idle_since = now
        idle.append(conn)

    async def close(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports finish closing


def _encode_request(method: str, target: URL, headers: Mapping[str, str], body: bytes) -> bytes:
    lines = [f"{method} {target.raw_path_qs} HTTP/1.1", f"host: {target.host_port_subcomponent}"]
    own = ((name, value) for name, value in headers.items() if name.lower() not in CONNECTION_HEADERS)
    lines.extend(f"{name}: {value}" for name, value in own)
    if body or method not in _BODYLESS_METHODS:
        lines.append(f"content-length: {len(body)}")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1") + body


class _StaleConnection(Exception):
    """A reused connection closed before any byte of the response: safe to retry fresh."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one exchange at a time."""

    def __init__(self) -> None:
        self._transport: asyncio.WriteTransport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[HttpResponse] | None = None
        self._reset()
        self.exchanges = 0
        self.idle_since = 0.0
        self.reusable = False

    def _reset(self) -> None:
        self._headers: dict[str, str] = {}
        self._header_bytes = 0
        self._headers_done = False
        self._header_name = ""
        self._status = 0
        self._body: list[bytes] = []
        self._body_size = 0
        self._received = False
        self._head = False
        self._max_body = 0

    @property
    def usable(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    async def exchange(self, message: bytes, head: bool, max_body: int) -> HttpResponse:
        if self._transport is None or self._transport.is_closing():
            raise _StaleConnection
        self._reset()
        self._head, self._max_body = head, max_body
        self.reusable = False
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(message)
        self.exchanges += 1
        return await self._waiter

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (asyncio's or uvloop's, which do not share a base class).
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            # Bytes nobody asked for (a late or extra response): the connection's framing
            # can no longer be trusted, so it is not reused.
            self.close()
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ProtocolError(f"invalid HTTP response: {exc}"))
        except httptools.HttpParserUpgrade:
            self._fail(ProtocolError("the server switched protocols"))
        if not self._headers_done:
            # Counted on the raw bytes: httptools holds a header value until it ends, so a
            # value that never ends would grow without limit before on_header saw it.
            self._header_bytes += len(data)
            if self._header_bytes > MAX_RESPONSE_HEADER_BYTES:
                self._fail(ProtocolError(f"response headers exceed {MAX_RESPONSE_HEADER_BYTES // 1024} KiB"))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._waiter is None or self._waiter.done():
            return
        if not self._received and self.exchanges > 1:
            self._waiter.set_exception(_StaleConnection())
        elif self._status:  # a body delimited by the connection's end
            self._finish(reusable=False)
        else:
            self._waiter.set_exception(ProtocolError("the server closed the connection without answering"))

    # httptools callbacks
    def on_message_begin(self) -> None:
        if self._waiter is not None and self._waiter.done():
            # A second response to one request (in the same read): untrustworthy framing.
            self.reusable = False
            self.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._status = self._parser.get_status_code()
        if self._head and self._status >= 200:  # no body follows, whatever Content-Length says
            self._finish(reusable=False)

    def on_body(self, body: bytes) -> None:
        room = self._max_body - self._body_size
        if room > 0:
            self._body.append(body[:room])
            self._body_size += min(room, len(body))
        if self._body_size >= self._max_body and len(body) > room:
            self._finish(reusable=False)  # enough: the rest is not read (the connection closes)

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:  # an interim answer (103 Early Hints…): the real one follows
            head, max_body = self._head, self._max_body
            self._reset()
            self._head, self._max_body, self._received = head, max_body, True
            return
        self._finish(reusable=self._parser.should_keep_alive())

    def _finish(self, reusable: bool) -> None:
        if self._waiter is None or self._waiter.done():
            return
        self.reusable = reusable
        self._waiter.set_result(HttpResponse(self._status, dict(self._headers), b"".join(self._body)))

    def _fail(self, error: HttpError) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self.close()
