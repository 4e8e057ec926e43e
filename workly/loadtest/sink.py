"""The no-op endpoint deliveries go to: a raw asyncio HTTP/1.1 server that answers 204.

It is deliberately bare (httptools, no framework) so that the endpoint costs as little
CPU as possible on a machine the server under test shares. Each delivery's path is
/d/<n>: the task's number, so arrivals are matched to enqueues without parsing bodies.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import cast

import httptools

_RESPONSE = b"HTTP/1.1 204 No Content\r\n\r\n"


class Sink:
    def __init__(self) -> None:
        self.arrivals: dict[int, float] = {}  # task number → first arrival (perf_counter)
        self.counts: Counter[int] = Counter()
        self.other = 0  # requests that are not /d/<n> (e.g. the ceiling probe)
        self.server: asyncio.Server | None = None
        self.url = ""

    def record(self, path: bytes) -> None:
        if path.startswith(b"/d/"):
            try:
                number = int(path[3:])
            except ValueError:
                self.other += 1
                return
            self.counts[number] += 1
            if number not in self.arrivals:
                self.arrivals[number] = time.perf_counter()
        else:
            self.other += 1

    @property
    def duplicates(self) -> int:
        return sum(count - 1 for count in self.counts.values() if count > 1)

    async def start(self, host: str = "127.0.0.1") -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _SinkProtocol(self), host, 0, backlog=1024)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://{host}:{port}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class _SinkProtocol(asyncio.Protocol):
    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._parser = httptools.HttpRequestParser(self)
        self._url = b""
        self._transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (asyncio's or uvloop's, which do not share a base class).
        self._transport = cast(asyncio.WriteTransport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            if self._transport is not None:
                self._transport.close()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._url = b""

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_message_complete(self) -> None:
        self._sink.record(self._url.split(b"?", 1)[0])
        if self._transport is not None:
            self._transport.write(_RESPONSE)
