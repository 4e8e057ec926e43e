"""The HTTP/1.1 client deliveries go through: small, keep-alive, and cheap per request.

A delivery needs one request and, of the answer, the status, a few headers and the
first bytes of the body. With aiohttp a request cost 121 µs of CPU and deliveries were
a third of the server's CPU at 1,500 tasks/s; with this client, 45 µs (both counting
the receiving end's share: tools/bench/http_clients.py, docs/performance.md).

By design it follows no redirects, keeps no cookies, asks for no compression and
decompresses nothing, reads at most ``max_body`` bytes of a response (a longer one closes
its connection instead of being drained) and at most 64 KiB of response headers.

- Addresses: it resolves the host once and checks every address against the outbound
  policy (workly/ssrf_guard.py), then connects only to those, Happy Eyeballs style
  (connect.py). Through an egress proxy it still refuses an IP literal or a name it can
  resolve to a refused address; what only the proxy can resolve, the proxy must judge.
- Proxy: https receivers through a CONNECT tunnel (TLS end to end with the receiver),
  http ones as absolute-form requests to the proxy.
- Time: ``timeout`` bounds one request. Once the response head has arrived its status
  stands: a body that stalls past the deadline is cut, not turned into a timeout.
- Re-sending: never. A kept-alive connection is reused only when it is provably still
  open (``Connection.alive``); a request that was written is answered, or its failure is
  the attempt's outcome, and the retry policy decides what follows.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager

from workly.clock import Clock
from workly.dispatch.http.connect import HAPPY_EYEBALLS_DELAY, connect_first, open_tunnel
from workly.dispatch.http.connection import Connection, HttpResponse
from workly.dispatch.http.errors import Blocked, ConnectError, NotSent, ProtocolError, ProxyRefused
from workly.dispatch.http.pool import IdlePool, Origin
from workly.dispatch.http.request import encode_request
from workly.request_rules import request_target
from workly.ssrf_guard import BlockedTarget, OutboundPolicy, Proxy

# host, port → the addresses it resolves to, in the order to try them.
Resolver = Callable[[str, int], Awaitable[list[str]]]


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


PROXIED_LOOKUP_TIMEOUT = 2.0  # seconds Workly's own lookup of a proxied target may take
_DEFAULT_PORTS = {"http": 80, "https": 443}


def canonical_host(raw_host: str) -> str:
    """The host as checked and sent: without the trailing dots of an absolute name (yarl
    leaves them out of the Host header, so the checks must too). A percent-encoded name, an
    IPv6 zone id and an empty name are refused: no DNS name holds a '%', and a proxy that
    decoded one would reach a host the checks never saw."""
    host = raw_host.rstrip(".")
    if "%" in host or not host:
        raise Blocked(f"{raw_host!r}: percent-encoded and empty host names and IPv6 zone ids are refused")
    return host


def literal_address(host: str) -> str | None:
    """The address an IP literal names, spelled as the checks spell it: IPv6 and dotted
    quads, and the other IPv4 spellings inet_aton reads (127.1, 0x7f.1, 2130706433), which
    resolvers and proxies take for addresses too. None for a name."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None


def authority(scheme: str, host: str, port: int) -> str:
    """host[:port] as the Host header and an absolute-form target name it."""
    shown = f"[{host}]" if ":" in host else host
    return shown if _DEFAULT_PORTS.get(scheme) == port else f"{shown}:{port}"


@contextmanager
def _closed_on_failure(sock: socket.socket, failure: str) -> Iterator[None]:
    """Close ``sock`` if the block fails; a socket error is a ConnectError saying ``failure``."""
    try:
        yield
    except OSError as exc:  # ssl.SSLError included
        sock.close()
        raise ConnectError(f"{failure}: {exc}") from None
    except BaseException:
        sock.close()
        raise


def _tunnel_authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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
        *,
        max_idle: int = 256,
        proxy: Proxy | None = None,
        happy_eyeballs_delay: float = HAPPY_EYEBALLS_DELAY,
        clock: Clock | None = None,
    ) -> None:
        """``policy``: the addresses deliveries may reach; by default public ones only.
        ``max_idle``: idle connections kept over all origins. ``clock``: whose monotonic time
        idle connections age by."""
        self._policy = policy or OutboundPolicy()
        self._resolve = resolver
        self._connect_timeout = connect_timeout
        self._max_body = max_body
        self._ssl = ssl_context or ssl.create_default_context()
        self._proxy = proxy
        self._delay = happy_eyeballs_delay
        self._pool = IdlePool(max_idle_per_origin, max_idle, idle_timeout, clock)

    @property
    def idle_connections(self) -> int:
        return len(self._pool)

    async def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        max_body: int | None = None,
        *,
        # The client keeps the deadline itself: a response head that came in time stands.
        timeout: float | None = None,  # noqa: ASYNC109
        may_send: Callable[[], bool] | None = None,
    ) -> HttpResponse:
        """Send one request. ``timeout``: seconds for the whole exchange; TimeoutError when
        no response head arrived within it. ``max_body``: response bytes to keep for this
        request (default: the client's). ``may_send``: asked once the connection is ready,
        right before the request is written (a connection may take seconds); NotSent when it
        says no, and the connection stays usable."""
        target = request_target(url)
        if target.scheme not in ("http", "https") or not target.raw_host or target.port is None:
            raise ProtocolError(f"not an absolute http(s) URL: {url!r}")
        # One spelling of the host for the checks, the connection, the Host header and what a
        # proxy is asked for: what is checked is what is sent.
        host = canonical_host(target.raw_host)
        origin = (target.scheme, host, target.port)
        # An absolute name (trailing dot) is looked up as such, never through search domains.
        lookup = f"{host}." if target.raw_host.endswith(".") and literal_address(host) is None else host
        forward_to = self._proxy if target.scheme == "http" else None  # https goes through a tunnel
        message = encode_request(
            method, target, authority(*origin), headers, body,
            absolute=forward_to is not None,
            proxy_authorization=forward_to.authorization if forward_to else None,
        )  # fmt: skip
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        conn = self._pool.take(origin) or await self._connect(origin, lookup, deadline)
        keep = self._max_body if max_body is None else max_body
        response = await self._exchange(origin, conn, message, method == "HEAD", keep, deadline, may_send)
        if forward_to is not None and response.status == 407:
            # Only a proxy answers 407: the request never reached the receiver.
            raise ProxyRefused(f"the proxy wants other credentials (407) for {authority(*origin)}")
        return response

    async def _exchange(
        self,
        origin: Origin,
        conn: Connection,
        message: bytes,
        head: bool,
        max_body: int,
        deadline: float | None,
        may_send: Callable[[], bool] | None,
    ) -> HttpResponse:
        if deadline is not None and deadline <= asyncio.get_running_loop().time():
            self._pool.put(origin, conn)  # no time left to send in: nothing is written
            raise TimeoutError
        # Asked here, with no await before the write: nothing else runs in between.
        if may_send is not None and not may_send():
            self._pool.put(origin, conn)
            raise NotSent
        try:
            answer = conn.send(message, head, max_body)
        except BaseException:
            conn.close()
            raise
        # The deadline fails the answer itself (unless it came first): a timer handle, where
        # asyncio.timeout_at costs a context manager, a reschedule and a cancel per request.
        expiry = None if deadline is None else asyncio.get_running_loop().call_at(deadline, _expire, answer)
        try:
            response = await answer
        except TimeoutError:
            partial = conn.partial()
            conn.close()
            if partial is None:
                raise
            return partial  # the head came in time: its status is the outcome
        except BaseException:
            conn.close()  # an error or a cancel mid-exchange leaves the connection unusable
            raise
        finally:
            if expiry is not None:
                expiry.cancel()
        if conn.reusable:
            self._pool.put(origin, conn)
        else:
            conn.close()
        return response

    async def _connect(self, origin: Origin, lookup: str, deadline: float | None) -> Connection:
        """A new connection to ``origin``; ``lookup``: the name its addresses are looked up by."""
        scheme, host, port = origin
        budget = asyncio.get_running_loop().time() + self._connect_timeout
        if deadline is not None and deadline <= budget:
            async with asyncio.timeout_at(deadline):  # the request's own time runs out first
                return await self._open(scheme, host, port, lookup)
        try:
            async with asyncio.timeout_at(budget):
                return await self._open(scheme, host, port, lookup)
        except TimeoutError:
            raise ConnectError(f"no connection to {host}:{port} within {self._connect_timeout:g}s") from None

    async def _open(self, scheme: str, host: str, port: int, lookup: str) -> Connection:
        if self._proxy is None:
            sock = await connect_first(await self._checked(lookup, port), port, self._delay)
        else:
            sock = await self._through_proxy(self._proxy, scheme, host, port, lookup)
        tls = self._ssl if scheme == "https" else None
        with _closed_on_failure(sock, f"TLS with {host}:{port} failed"):
            _, conn = await asyncio.get_running_loop().create_connection(
                Connection, sock=sock, ssl=tls, server_hostname=host if tls else None
            )
        return conn

    async def _checked(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` the policy allows (all of them, or Blocked)."""
        literal = literal_address(host)
        if literal is not None:
            return self._allowed(host, [literal])
        try:
            resolved = await self._resolve(host, port)
        except OSError as exc:
            raise ConnectError(f"cannot resolve {host}: {exc}") from None
        return self._allowed(host, resolved)

    def _allowed(self, host: str, resolved: list[str]) -> list[str]:
        try:
            return self._policy.check(host, resolved)
        except BlockedTarget as exc:
            raise Blocked(str(exc)) from None

    async def _through_proxy(
        self, proxy: Proxy, scheme: str, host: str, port: int, lookup: str
    ) -> socket.socket:
        literal = literal_address(host)
        if literal is not None:  # every spelling of an address is judged here, never left to the proxy
            self._allowed(host, [literal])
        else:
            try:
                # Bounded apart: where only the proxy has a resolver, a lookup may hang
                # instead of failing, and must not eat the connection's budget.
                async with asyncio.timeout(PROXIED_LOOKUP_TIMEOUT):
                    resolved = await self._resolve(lookup, port)
            except (OSError, TimeoutError):
                pass  # a name only the proxy can resolve: its own rules decide (docs/security.md)
            else:
                self._allowed(host, resolved)
        proxy_address = literal_address(proxy.host)
        try:
            proxies = [proxy_address] if proxy_address else await self._resolve(proxy.host, proxy.port)
        except OSError as exc:
            raise ConnectError(f"cannot resolve the proxy {proxy.host}: {exc}") from None
        try:
            sock = await connect_first(proxies, proxy.port, self._delay)
        except ConnectError as exc:
            raise ConnectError(f"no connection to the proxy {proxy}: {exc}") from None
        if scheme == "https":
            with _closed_on_failure(sock, "the proxy's connection failed"):
                await open_tunnel(sock, _tunnel_authority(host, port), proxy.authorization)
        return sock

    async def close(self) -> None:
        self._pool.close()
        await asyncio.sleep(0)  # let the transports finish closing


def _expire(answer: asyncio.Future[HttpResponse]) -> None:
    if not answer.done():
        answer.set_exception(TimeoutError())
