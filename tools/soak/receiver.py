"""The soak's receivers: raw HTTP/1.1 servers on 127.0.0.1 whose answers the path decides.

Three origins, so that one receiver's trouble opens only its own circuit breaker (Workly
keeps one per scheme, host and port):

- ``good``: ``/ok/<serial>`` 204; ``/flaky/<serial>`` 500 for the first ``serial % 3 + 1``
  requests, then 204; ``/gone/<serial>`` 410; ``/fail/<serial>`` always 500;
  ``/delay/<serial>/<due>`` 204, and a breach if it came before ``due`` (unix ms);
  ``/key/<key>/<seq>/<serial>`` held 200 ms, then 204 (every 20th serial 500 once), one at a
  time per key (never two of a key in flight here at once) and in order;
  ``/limited/<serial>`` held 20 ms, never more in flight than the queue's limit;
  ``/ep/<name>`` an endpoint's event deliveries (the body carries the serial), every 7th
  serial 500 once on ``ep/flaky``.
- ``rough``: ``/rough/<serial>`` 204 (most of its traffic); on the first request of each
  delivery, ``/stall/<serial>`` holds the request
  past Workly's timeout and closes without an answer, ``/reset/<serial>`` resets the
  connection, ``/throttle/<serial>`` answers 429 with ``Retry-After: 1``; then 204.
- ``outage``: ``/outage/<serial>`` 204, but the fault schedule takes this origin down for
  minutes at a time (its listening socket and its connections closed).

Every request is entered in the ledger under its ``webhook-id`` and path.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections.abc import Callable
from typing import cast

import httptools

from tools.soak.ledger import Delivery, Ledger

STALL_SECONDS = 7.0  # longer than the soak queues' 5 s timeout
LIMITED_HOLD = 0.02
# A keyed request is held so that it is in flight here for a while: answered at once, two of
# a key could never be seen at the same time. Long enough that a request sent without a lease
# (issue 40) is likely to land while another of its key is held (each key gets about 1.2 a
# second at 500 sends a second), short enough that a key's backlog drains.
KEY_HOLD = 0.2
_REASONS = {204: "No Content", 410: "Gone", 429: "Too Many Requests", 500: "Internal Server Error"}


def _response(status: int, extra: str = "") -> bytes:
    body = "" if status == 204 else "content-length: 0\r\n"
    return f"HTTP/1.1 {status} {_REASONS[status]}\r\n{extra}{body}\r\n".encode()


_ANSWERS = {status: _response(status) for status in _REASONS}
_THROTTLED = _response(429, "retry-after: 1\r\n")


class Receiver:
    """One origin. ``limits``: max_concurrency of the queues whose in-flight count is checked."""

    def __init__(self, name: str, ledger: Ledger, limits: dict[str, int] | None = None) -> None:
        self.name = name
        self.ledger = ledger
        self.limits = limits or {}
        self.port = 0
        self.requests = 0
        self.other = 0  # requests no delivery of the soak's: Workly's own workly.* notices
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def up(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        """Listen (again, on the same port after a stop); nothing when already listening."""
        if self._server is not None:
            return
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), "127.0.0.1", self.port, backlog=1024, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Close the listening socket and every connection: the origin is down."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for connection in list(self._connections):
            connection.abort()
        await server.wait_closed()

    # What each path answers. ``respond(status)`` answers now; a handler may answer later.
    def handle(self, path: str, webhook_id: str, body: bytes, connection: _Connection) -> None:
        now = time.time()
        self.requests += 1
        parts = path.split("/")
        kind = parts[1] if len(parts) > 1 else ""
        if kind == "ep":
            self._endpoint(parts, webhook_id, body, connection, now)
            return
        try:
            serial = int(parts[4] if kind == "key" else parts[2])
        except (ValueError, IndexError):
            connection.answer(_ANSWERS[500])
            return
        delivery = self.ledger.arrived(webhook_id, path, serial, now)
        if kind in ("ok", "rough", "outage"):
            self.ledger.first_arrival(delivery, serial, now)
            self._answer(delivery, connection, 204, now)
        elif kind == "flaky":
            self._answer(delivery, connection, 500 if delivery.requests <= serial % 3 + 1 else 204, now)
        elif kind == "gone":
            self._answer(delivery, connection, 410, now)
        elif kind == "fail":
            self._answer(delivery, connection, 500, now)
        elif kind == "delay":
            due = int(parts[3]) / 1000
            if now < due:
                self.ledger.early(webhook_id, due - now, now)
            self._answer(delivery, connection, 204, now)
        elif kind == "key":
            self._keyed(parts[2], int(parts[3]), serial, webhook_id, delivery, connection, now)
        elif kind == "limited":
            self._limited(delivery, connection, now)
        elif kind in ("stall", "reset", "throttle"):
            self._rough(kind, delivery, connection, now)
        else:
            connection.answer(_ANSWERS[500])

    def _answer(self, delivery: Delivery, connection: _Connection, status: int, now: float) -> None:
        self.ledger.answered(delivery, status, now)
        connection.answer(_ANSWERS[status])

    def _endpoint(
        self, parts: list[str], webhook_id: str, body: bytes, connection: _Connection, now: float
    ) -> None:
        try:
            serial = int(json.loads(body)["serial"])
        except (ValueError, KeyError, TypeError):
            self.other += 1  # a workly.* event to an endpoint subscribed to every type
            connection.answer(_ANSWERS[204])
            return
        path = "/".join(parts)
        delivery = self.ledger.arrived(webhook_id, path, None, now)
        self.ledger.first_arrival(delivery, serial, now)
        flaky = parts[2] == "flaky" and serial % 7 == 0 and delivery.requests == 1
        self._answer(delivery, connection, 500 if flaky else 204, now)

    def _keyed(
        self,
        key: str,
        seq: int,
        serial: int,
        webhook_id: str,
        delivery: Delivery,
        connection: _Connection,
        now: float,
    ) -> None:
        request = self.ledger.ordered_start(key, seq, webhook_id, now)
        connection.on_end(lambda: self.ledger.ordered_end(request))
        status = 500 if serial % 20 == 0 and delivery.requests == 1 else 204
        self._answer_later(delivery, connection, status, KEY_HOLD)

    def _limited(self, delivery: Delivery, connection: _Connection, now: float) -> None:
        queue = "soak-limited"
        self.ledger.limited_start(queue, self.limits[queue], now)
        connection.on_end(lambda: self.ledger.limited_end(queue))
        self._answer_later(delivery, connection, 204, LIMITED_HOLD)

    def _answer_later(self, delivery: Delivery, connection: _Connection, status: int, hold: float) -> None:
        """Answer after ``hold`` seconds, unless the connection is gone by then (Workly killed):
        an answer nobody can read is no 2xx for the books."""

        def answer() -> None:
            if connection.open:
                self._answer(delivery, connection, status, time.time())

        asyncio.get_running_loop().call_later(hold, answer)

    def _rough(self, kind: str, delivery: Delivery, connection: _Connection, now: float) -> None:
        if delivery.requests > 1:
            self._answer(delivery, connection, 204, now)
        elif kind == "stall":
            asyncio.get_running_loop().call_later(STALL_SECONDS, connection.abort)
        elif kind == "reset":
            connection.reset()
        else:
            self.ledger.answered(delivery, 429, now)
            connection.answer(_THROTTLED)


class _Connection(asyncio.Protocol):
    """One connection: parses requests with httptools, one at a time (Workly does not pipeline)."""

    def __init__(self, receiver: Receiver) -> None:
        self._receiver = receiver
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.WriteTransport | None = None
        self._url = b""
        self._webhook_id = ""
        self._header = b""
        self._body: list[bytes] = []
        self._ends: list[Callable[[], None]] = []  # run when the current request is answered or dropped

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.WriteTransport, transport)
        self._receiver._connections.add(self)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._receiver._connections.discard(self)
        self._transport = None
        self._end()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._url, self._webhook_id, self._body = b"", "", []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"webhook-id":
            self._webhook_id = value.decode()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        path = self._url.split(b"?", 1)[0].decode(errors="replace")
        self._receiver.handle(path, self._webhook_id, b"".join(self._body), self)

    # answers
    def on_end(self, callback: Callable[[], None]) -> None:
        self._ends.append(callback)

    def _end(self) -> None:
        ends, self._ends = self._ends, []
        for callback in ends:
            callback()

    def answer(self, response: bytes) -> None:
        self._end()  # the request is over for the ledger before the client can send the next
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(response)

    @property
    def open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def reset(self) -> None:
        """Close with a TCP RST (SO_LINGER 0), as a crashing receiver's kernel would."""
        if self._transport is None:
            return
        sock = self._transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._transport.abort()
