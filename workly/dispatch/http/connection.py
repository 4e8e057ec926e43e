"""One keep-alive HTTP/1.1 connection: one exchange at a time, parsed with httptools.

The parser is lenient where real receivers are sloppy and the leniency cannot change
what a response means: a bare LF where CRLF belongs in the status line and headers, and
obs-fold (a header value continued on the next line) and other stray characters in
header values. Both turned delivered webhooks into protocol errors and re-sends. A body
is still framed strictly (Content-Length and Transfer-Encoding together are refused).
"""

from __future__ import annotations

import asyncio
import re
import select
import ssl
from dataclasses import dataclass

import httptools

from workly.dispatch.http.errors import HttpError, ProtocolError

MAX_RESPONSE_HEADER_BYTES = 64 * 1024
_KEEP_ALIVE_TIMEOUT = re.compile(r"timeout\s*=\s*(\d+)", re.IGNORECASE)
_READABLE = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes  # at most max_body bytes
    # False when the body stopped short (it stalled past the deadline, or the peer closed
    # before its announced end): the status still stands, the head had arrived.
    complete: bool = True


class Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self._transport: asyncio.WriteTransport | None = None
        self._poller: select.poll | None = None  # watches the socket for alive()
        self._tls = False
        self._parser = httptools.HttpResponseParser(self)
        self._parser.set_dangerous_leniencies(lenient_optional_cr_before_lf=True, lenient_headers=True)
        self._waiter: asyncio.Future[HttpResponse] | None = None
        self._reset()
        self.exchanges = 0
        self.reusable = False
        self.idle_since = 0.0  # set by the pool
        # Seconds the server said it keeps an idle connection (Keep-Alive: timeout=N).
        self.keep_alive: float | None = None

    def _reset(self) -> None:
        self._headers: dict[str, str] = {}
        self._header_bytes = 0
        self._headers_done = False
        self._status = 0
        self._body: list[bytes] = []
        self._body_size = 0  # bytes kept
        self._body_seen = 0  # bytes received
        self._head = False
        self._max_body = 0

    def alive(self) -> bool:
        """Open, and nothing waiting to be read. On an idle connection anything readable
        is the peer's close (FIN, RST) or bytes nobody asked for: such a connection is
        never written to. One poll(2) looks at what the event loop has not read yet."""
        if self._transport is None or self._transport.is_closing():
            return False
        return self._poller is None or not self._poller.poll(0)

    def send(self, message: bytes, head: bool, max_body: int) -> asyncio.Future[HttpResponse]:
        """Write one request; the future resolves with its response."""
        if self._transport is None or self._transport.is_closing():
            raise ProtocolError("the connection is closed")
        self._reset()
        self._head, self._max_body = head, max_body
        self.reusable = False
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(message)
        self.exchanges += 1
        return self._waiter

    def partial(self) -> HttpResponse | None:
        """The response so far of the exchange under way (``send`` resets it), once its
        head has arrived: what a body that stalls leaves."""
        if not self._headers_done or self._status < 200:
            return None
        return HttpResponse(self._status, dict(self._headers), b"".join(self._body), complete=False)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (asyncio's or uvloop's, which do not share a base class).
        self._transport = transport  # type: ignore[assignment]
        self._tls = transport.get_extra_info("ssl_object") is not None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._poller = select.poll()
            self._poller.register(sock.fileno(), _READABLE)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            # Bytes nobody asked for (a late or extra response): the connection's framing
            # can no longer be trusted, so it is not reused.
            self.close()
            return
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
        self._poller = None  # its descriptor is closed (and may be reused)
        if self._waiter is None or self._waiter.done():
            return
        if self._headers_done and self._status >= 200:
            # A body delimited by the connection's end, or one cut short: the head stands.
            self._finish(reusable=False, complete=self._ended_by_close())
        else:
            message = "the server closed the connection without answering"
            if isinstance(exc, ssl.SSLError):
                message += f" (TLS: {exc.reason or exc})"
            elif self._tls and self.exchanges == 1:
                # With TLS 1.3 a receiver that wants a client certificate says so only by this.
                message += " (a receiver that requires a client certificate does this without one)"
            self._waiter.set_exception(ProtocolError(message))

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
        hint = self._headers.get("keep-alive")
        if hint is not None and (found := _KEEP_ALIVE_TIMEOUT.search(hint)):
            self.keep_alive = float(found.group(1))

    def on_body(self, body: bytes) -> None:
        self._body_seen += len(body)
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
            self._head, self._max_body = head, max_body
            return
        self._finish(reusable=self._parser.should_keep_alive())

    def _ended_by_close(self) -> bool:
        """Whether the connection's end is the body's end (no length was announced)."""
        if "transfer-encoding" in self._headers:
            return False  # the last chunk never came
        length = self._headers.get("content-length")
        return length is None or (length.strip().isdigit() and self._body_seen >= int(length))

    def _finish(self, reusable: bool, complete: bool = True) -> None:
        if self._waiter is None or self._waiter.done():
            return
        self.reusable = reusable
        body = b"".join(self._body)
        self._waiter.set_result(HttpResponse(self._status, dict(self._headers), body, complete))

    def _fail(self, error: HttpError) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self.close()
