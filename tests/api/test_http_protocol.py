"""The front door's deadlines and bounds (workly/web/http_protocol.py), over real sockets, on a
uvicorn server as `workly serve` configures it but with deadlines of a fraction of a second:
a connection that sends no complete request head is closed, as is one whose body stalls; a
head over 64 KiB gets 431; one connection over the limit is closed at once; a request in time
is answered, and its connection kept alive until the next head's deadline."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import uvicorn

from tests.support.servers import TEST_SECRET
from workly.app import create_app
from workly.config import Settings
from workly.service import Service
from workly.web.http_protocol import GuardedHttpToolsProtocol

SHORT = 0.3  # seconds: the deadlines here
LIMIT = 3  # connections
HEALTH = b"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


class Quick(GuardedHttpToolsProtocol):
    head_seconds = SHORT
    body_stall_seconds = SHORT
    max_connections = LIMIT


class Server:
    """The server's port, and the client connections a test opened (closed at its end)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.writers: list[asyncio.StreamWriter] = []

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writers.append(writer)
        return reader, writer

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


@asynccontextmanager
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'w.db'}", signing_secret=TEST_SECRET, dispatch=False
    )
    config = uvicorn.Config(
        create_app(Service(settings), anonymous=True),
        http=Quick,
        lifespan="on",
        log_level="warning",
        timeout_keep_alive=60,  # uvicorn's own idle timeout out of the way: the head deadline closes
    )
    served = uvicorn.Server(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    serving = asyncio.create_task(served.serve(sockets=[sock]))
    try:
        while not served.started:
            assert not serving.done(), serving
            await asyncio.sleep(0.01)
        running = Server(sock.getsockname()[1])
        try:
            yield running
        finally:
            await running.close()
    finally:
        served.should_exit = True
        await serving


async def closed(reader: asyncio.StreamReader) -> bytes:
    """What the server sent until it closed the connection (waits for that, 10 s at most)."""
    return await asyncio.wait_for(reader.read(), 10)


async def test_a_connection_that_sends_no_head_in_time_is_closed(tmp_path: Path) -> None:
    async with server(tmp_path) as running:
        idle, _ = await running.connect()
        partial, writer = await running.connect()
        writer.write(b"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and nothing more
        assert await closed(idle) == b""
        assert await closed(partial) == b""


async def test_a_request_in_time_is_answered_and_the_next_head_has_its_deadline(tmp_path: Path) -> None:
    async with server(tmp_path) as running:
        reader, writer = await running.connect()
        writer.write(HEALTH)
        status = await asyncio.wait_for(reader.readline(), 10)
        assert status.startswith(b"HTTP/1.1 200"), status
        rest = await closed(reader)  # the answer's headers and body, then the close
        assert rest.endswith(b"}"), rest


async def test_a_head_over_64_kib_gets_431_and_nothing_more_is_read(tmp_path: Path) -> None:
    async with server(tmp_path) as running:
        reader, writer = await running.connect()
        writer.write(
            b"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n"
        )
        answer = await closed(reader)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 431"), answer[:200]
        assert json.loads(body)["type"] == "urn:workly:problem:head-too-large"


async def test_a_body_that_stalls_ends_its_connection(tmp_path: Path) -> None:
    async with server(tmp_path) as running:
        reader, writer = await running.connect()
        writer.write(
            b"POST /v1/queues/q/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b'content-length: 100\r\n\r\n{"url":'
        )
        assert await closed(reader) == b""


async def test_one_connection_over_the_limit_is_closed_at_once(tmp_path: Path) -> None:
    async with server(tmp_path) as running:
        held = [await running.connect() for _ in range(LIMIT)]
        for _, writer in held:
            writer.write(b"GET")  # begun: each counts until its deadline
        over, _ = await running.connect()
        assert await closed(over) == b""
        for reader, _ in held:
            assert await closed(reader) == b""  # their deadlines ended them
        reader, writer = await running.connect()  # room again
        writer.write(HEALTH)
        assert (await asyncio.wait_for(reader.readline(), 10)).startswith(b"HTTP/1.1 200")


async def test_one_header_streamed_in_pieces_past_64_kib_gets_431(tmp_path: Path) -> None:
    """httptools gathers a header whole before it reports it: the head is counted as it
    arrives, so an endless header is cut off at the limit, not read on."""
    async with server(tmp_path) as running:
        reader, writer = await running.connect()
        writer.write(b"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        for _ in range(20):  # 80 KiB, in pieces, never ending the header
            writer.write(b"a" * 4096)
            await writer.drain()
        answer = await closed(reader)
        assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
        assert b"x-content-type-options: nosniff" in answer


async def test_a_body_trickled_after_an_early_answer_earns_no_time(tmp_path: Path) -> None:
    """A request answered before its body was read (a GET with a body, as a 401 is answered)
    gets its answer; a body that ends only afterwards leaves the connection to the next head's
    deadline (it was left with none)."""
    async with server(tmp_path) as running:
        reader, writer = await running.connect()
        writer.write(b"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-length: 3\r\n\r\n")
        status = await asyncio.wait_for(reader.readline(), 10)
        assert status.startswith(b"HTTP/1.1 200"), status
        writer.write(b"xyz")  # the body ends after its answer: the next head's deadline still holds
        await writer.drain()
        assert (await closed(reader)).endswith(b"}")  # the rest of the answer, then the close
