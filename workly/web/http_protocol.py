"""uvicorn's HTTP protocol (httptools) with the deadlines and bounds a server facing a network
needs, which uvicorn leaves out (docs/security.md, "The front door"):

- at most ``max_connections`` open connections: one more is closed as it is accepted, before
  anything is read from it (idle connections once used up the descriptors, and /health with
  them);
- a request head (request line and headers) must be complete within ``HEAD_SECONDS`` of the
  connection, or of the end of the previous answer on it: a client that sends nothing, or
  its headers a byte at a time, is disconnected;
- a request head is at most ``MAX_HEAD_BYTES``: a larger one gets 431 and the connection closes
  (30 MB of headers were once read before a 401);
- a body that stops arriving for ``BODY_STALL_SECONDS`` ends the connection.

``guarded_protocol(max_connections)`` makes the class uvicorn's Config takes (``http=``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEAD_SECONDS = 10.0
BODY_STALL_SECONDS = 30.0
MAX_HEAD_BYTES = 64 * 1024


class _HeadTooLarge(Exception):
    pass


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    max_connections = 1000
    head_seconds = HEAD_SECONDS
    body_stall_seconds = BODY_STALL_SECONDS
    max_head_bytes = MAX_HEAD_BYTES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._head_too_large = False
        self._awaiting_head = True
        self._raw_head = 0  # bytes of the pending head received so far, counted before parsing
        self._tail = b""  # the last bytes received while awaiting a head: "\r\n\r\n" may straddle

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.abort()  # before anything is read: the descriptor goes back at once
            return
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self._awaiting_head and not self._count_raw_head(data):
            return
        super().data_received(data)

    def _count_raw_head(self, data: bytes) -> bool:
        """Count ``data`` toward the pending head before httptools sees it (it gathers a header
        whole before calling on_header: one endless header would never be counted there);
        False once the head passes the limit (431 sent)."""
        seen = self._tail + data
        end = seen.find(b"\r\n\r\n")
        part = len(data) if end == -1 else max(0, end + 4 - len(self._tail))
        self._raw_head += part
        self._tail = seen[-3:]
        if end != -1:
            self._awaiting_head = False
        if self._raw_head > self.max_head_bytes:
            self._head_too_large = True
            self.send_400_response("")
            return False
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._cancel_deadline()
        super().on_headers_complete()
        if not self.transport.is_closing() and self.cycle is not None and self.cycle.more_body:
            self._await_body()

    def on_body(self, body: bytes) -> None:
        if not self._answered():
            self._await_body()  # after an early answer (a 401) a trickled body earns no more time
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel_deadline()
        self._awaiting_head, self._raw_head, self._tail = True, 0, b""
        super().on_message_complete()
        if self._answered() and not self.transport.is_closing():
            self._await_head()  # answered before its body ended: the next head has its deadline

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # uvicorn starts the next pipelined request in the call
        super().on_response_complete()
        if not self.transport.is_closing() and not pipelined:
            self._await_head()  # the next request's head, beside uvicorn's keep-alive timeout

    def _answered(self) -> bool:
        return self.cycle is not None and self.cycle.response_complete

    def send_400_response(self, msg: str) -> None:
        if not self._head_too_large:
            super().send_400_response(msg)
            return
        detail = f"The request's head is larger than {self.max_head_bytes:,} bytes."
        body = json.dumps(
            {"type": "urn:workly:problem:head-too-large", "title": "Request Header Fields Too Large",
             "status": 431, "detail": detail}
        ).encode()  # fmt: skip
        head = (
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/problem+json\r\n"
            b"x-content-type-options: nosniff\r\ncache-control: no-store\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
        )
        self.transport.write(head + body)
        self.transport.close()

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.max_head_bytes:
            self._head_too_large = True
            raise _HeadTooLarge  # httptools stops parsing; uvicorn answers through send_400_response

    def _await_head(self) -> None:
        self._set_deadline(self.head_seconds)

    def _await_body(self) -> None:
        self._set_deadline(self.body_stall_seconds)

    def _set_deadline(self, seconds: float) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(seconds, self._expire)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(max_connections: int) -> type[GuardedHttpToolsProtocol]:
    """The protocol class for a server that keeps at most ``max_connections`` open."""
    return type("GuardedHttpTools", (GuardedHttpToolsProtocol,), {"max_connections": max_connections})
