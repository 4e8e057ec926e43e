"""A TCP server on 127.0.0.1 that answers HTTP byte for byte, for testing the HTTP client."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b"HTTP/1.1 204 No Content\r\n\r\n"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request (head and Content-Length body) off the connection; b"" at its end."""
    head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + (await reader.readexactly(length) if length else b"")


class RawServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.closed = 0  # connections this side has closed, its handler done
        self._closing = asyncio.Condition()
        self.requests: list[bytes] = []
        self.url = ""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()
            async with self._closing:
                self.closed += 1
                self._closing.notify_all()

    async def until_closed(self, count: int, timeout: float = 10) -> None:
        """Wait until this side has closed ``count`` connections (their FIN is sent)."""
        async with asyncio.timeout(timeout), self._closing:
            await self._closing.wait_for(lambda: self.closed >= count)


async def forever() -> None:
    """A peer that never answers: waits until the test's end cancels it."""
    await asyncio.Event().wait()


@asynccontextmanager
async def raw_server(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[RawServer]:
    server = RawServer(handler)
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0, ssl=tls)
    port = listener.sockets[0].getsockname()[1]
    server.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    async with listener:
        yield server
        listener.close()


def answering_then_closing(response: bytes) -> Handler:
    """Answer the first request on a connection with ``response``, then close it."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(response)
        await writer.drain()

    return handler


def answering(*responses: bytes, record: list[bytes] | None = None) -> Handler:
    """Answer each request on a connection with the next response, then keep reading."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for response in responses:
            request = await read_request(reader)
            if not request:
                return
            if record is not None:
                record.append(request)
            writer.write(response)
            await writer.drain()
        while await read_request(reader):
            writer.write(OK)

    return handler


@contextmanager
def black_hole(host: str, port: int = 0) -> Iterator[int]:
    """A listener on host:port whose accept queue is full and never drained: the kernel
    drops further SYNs, so a connect to it hangs as one to a dead address does, without
    a packet leaving loopback. Yields the port (a free one when ``port`` is 0)."""
    listener = socket.socket()
    fillers: list[socket.socket] = []
    try:
        listener.bind((host, port))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(16):
            filler = socket.socket()
            filler.setblocking(False)
            fillers.append(filler)
            with contextlib.suppress(BlockingIOError):
                filler.connect((host, port))
            _, writable, _ = select.select([], [filler], [], 0.2)
            if not writable:  # this one hangs: the queue is full
                break
        else:
            raise RuntimeError(f"could not fill the accept queue of {host}:{port}")
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
