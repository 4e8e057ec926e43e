"""A small HTTP proxy on 127.0.0.1 for the delivery client's tests: CONNECT tunnels and
absolute-form forwarding, like smokescreen or squid, and nothing but loopback behind it.

It records what it was asked (the CONNECT authorities, the forwarded request lines, the
Proxy-Authorization values) and refuses, with 403, any destination that is not
127.0.0.1: no test traffic ever leaves the machine through it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

LOOPBACK_ONLY = "127.0.0.1"


@dataclass
class RecordingProxy:
    port: int = 0
    connects: list[str] = field(default_factory=list)  # CONNECT authorities, in order
    forwarded: list[str] = field(default_factory=list)  # request lines of forwarded requests
    authorizations: list[str | None] = field(default_factory=list)
    refuse_with: bytes | None = None  # answer every request with this instead

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK_ONLY}:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        self.authorizations.append(
            next((v for k, v in headers.items() if k.lower() == "proxy-authorization"), None)
        )
        if method == "CONNECT":
            self.connects.append(target)
            host, _, port = target.rpartition(":")
            await self._relay(reader, writer, host, int(port), b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            self.forwarded.append(lines[0])
            parts = urlsplit(target)
            # The request goes on as it came (absolute-form): the test servers read any target.
            await self._relay(reader, writer, parts.hostname or "", parts.port or 80, b"", first=head)

    async def _relay(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
        answer: bytes,
        first: bytes = b"",
    ) -> None:
        if self.refuse_with is not None or host != LOOPBACK_ONLY:
            writer.write(self.refuse_with or b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            writer.close()
            return
        writer.write(answer)
        up_writer.write(first)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


@asynccontextmanager
async def running_proxy(port: int = 0) -> AsyncIterator[RecordingProxy]:
    """``port``: where to listen (a free one when 0)."""
    proxy = RecordingProxy()
    listener = await asyncio.start_server(proxy.handle, LOOPBACK_ONLY, port)
    proxy.port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield proxy
        listener.close()
