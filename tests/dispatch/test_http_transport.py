"""The delivery client's transport, pinned byte for byte against raw servers on 127.0.0.1:
framing, the leniency real receivers need, a head whose body stalls, when a request may be
sent again (never, once written), and the idle pool's expiry and caps."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import time
from collections.abc import AsyncIterator

import pytest

from tests.support.clock import VirtualClock
from tests.support.raw_server import (
    OK,
    answering,
    answering_then_closing,
    forever,
    raw_server,
    read_request,
)
from workly.dispatch.http import HttpClient, HttpResponse, ProtocolError
from workly.ssrf_guard import LOOPBACK, OutboundPolicy

LOCAL = OutboundPolicy(LOOPBACK)


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    http = HttpClient(max_body=64, policy=LOCAL)
    yield http
    await http.close()


async def send(client: HttpClient, url: str, method: str = "POST", timeout: float = 5.0) -> HttpResponse:
    return await client.request(method, url + "/", {}, b"x" if method == "POST" else b"", timeout=timeout)


# --- framing the client already got right, pinned -------------------------------------------


@pytest.mark.parametrize(
    ("answer", "status", "body", "reused"),
    [
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            200,
            b"abcde",
            True,
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, b"ok", True),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 200, b"ok", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, b"ok", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", 200, b"ok", True),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", 201, b"", True),
        (b"HTTP/1.1 204 No Content\r\n\r\n", 204, b"", True),
    ],
    ids=["chunked", "content-length", "connection close", "http/1.0", "http/1.0 keep-alive", "1xx", "204"],
)
async def test_framing(client: HttpClient, answer: bytes, status: int, body: bytes, reused: bool) -> None:
    async with raw_server(answering(answer, OK)) as server:
        response = await client.request("POST", server.url + "/", {}, b"x", timeout=5)
        again = await client.request("POST", server.url + "/", {}, b"x", timeout=5)
    # Each connection's first answer is ``answer``: the second request meets it again on a new one.
    assert (response.status, response.body, response.complete) == (status, body, True)
    assert (again.status, server.connections) == ((204, 1) if reused else (status, 2))


async def test_content_length_with_transfer_encoding_is_refused(client: HttpClient) -> None:
    smuggled = (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    )
    async with raw_server(answering(smuggled)) as server:
        with pytest.raises(ProtocolError, match="Content-Length"):
            await send(client, server.url)


async def test_a_gzip_body_is_passed_through_as_sent(client: HttpClient) -> None:
    packed = gzip.compress(b"hello")
    answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed) + packed
    seen: list[bytes] = []
    async with raw_server(answering(answer, record=seen)) as server:
        response = await client.request("GET", server.url + "/", {}, b"", timeout=5)
    assert (response.body, response.headers["content-encoding"]) == (packed, "gzip")
    assert b"accept-encoding" not in seen[0].lower()


async def test_head_answers_without_a_body_and_its_connection_is_not_reused(client: HttpClient) -> None:
    heads = answering(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n")
    async with raw_server(heads) as server:
        response = await client.request("HEAD", server.url + "/", {}, b"", timeout=5)
        again = await client.request("HEAD", server.url + "/", {}, b"", timeout=5)
    assert (response.status, response.body, response.complete) == (200, b"", True)
    assert (again.status, server.connections) == (200, 2)


# --- leniency -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "header", "value"),
    [
        (b"HTTP/1.1 200 OK\nContent-Length: 2\nX-Seen: yes\n\nok", "x-seen", "yes"),
        (b"HTTP/1.1 200 OK\r\nX-Seen: yes\nContent-Length: 2\r\n\r\nok", "x-seen", "yes"),
        (b"HTTP/1.1 200 OK\r\nX-Long: one\r\n two\r\nContent-Length: 2\r\n\r\nok", "x-long", "one two"),
        (b"HTTP/1.1 200 OK\r\nX-Long: one\r\n\ttwo\r\nContent-Length: 2\r\n\r\nok", "x-long", "one\ttwo"),
    ],
    ids=["bare LF", "a bare LF among CRLFs", "obs-fold", "obs-fold with a tab"],
)
async def test_sloppy_heads_real_receivers_send_are_read(
    client: HttpClient, answer: bytes, header: str, value: str
) -> None:
    async with raw_server(answering(answer, OK)) as server:
        response = await send(client, server.url)
        again = await send(client, server.url)
    assert (response.status, response.body, response.headers[header]) == (200, b"ok", value)
    assert (again.status, server.connections) == (204, 1)


# --- a head that arrives, a body that stalls ---------------------------------------------------


@pytest.mark.parametrize("status", [200, 503])
async def test_a_stalled_body_after_the_head_keeps_the_status(client: HttpClient, status: int) -> None:
    async def head_then_stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 %d X\r\nContent-Length: 1000\r\n\r\npart" % status)
        await writer.drain()
        await forever()

    async with raw_server(head_then_stall) as server:
        response = await client.request("POST", server.url + "/", {}, b"x", timeout=0.3)
    assert (response.status, response.body, response.complete) == (status, b"part", False)
    assert client.idle_connections == 0


async def test_no_head_within_the_timeout_is_a_timeout(client: HttpClient) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Le")  # half a head
        await writer.drain()
        await forever()

    async with raw_server(silent) as server:
        with pytest.raises(TimeoutError):
            await client.request("POST", server.url + "/", {}, b"x", timeout=0.3)
    assert client.idle_connections == 0


async def test_a_body_cut_by_the_close_keeps_the_status(client: HttpClient) -> None:
    async with raw_server(
        answering_then_closing(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npart")
    ) as server:
        response = await send(client, server.url)
    assert (response.status, response.body, response.complete) == (200, b"part", False)


# --- sending again ----------------------------------------------------------------------------


async def test_a_request_the_receiver_read_then_dropped_is_not_sent_again(client: HttpClient) -> None:
    """The second request reaches the server on the kept-alive connection, which reads it
    and closes without answering: that is the attempt's failure, never a second send."""
    requests: list[bytes] = []

    async def answers_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await read_request(reader))
        writer.write(OK)
        await writer.drain()
        requests.append(await read_request(reader))  # read, processed, and then the crash

    async with raw_server(answers_once) as server:
        assert (await send(client, server.url)).status == 204
        with pytest.raises(ProtocolError, match="without answering"):
            await send(client, server.url)
        await server.until_closed(1)  # the handler is done: both requests it read are recorded
    assert (len(requests), server.connections) == (2, 1)


async def test_a_connection_closed_while_idle_is_never_written_to(client: HttpClient) -> None:
    """The server closes right after answering; the close reaches the socket before the
    event loop reads it: the next request still goes on a fresh connection, once."""
    requests: list[bytes] = []

    async def close_after_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await read_request(reader))
        writer.write(OK)  # keep-alive by HTTP/1.1 default, then closed anyway
        await writer.drain()

    async with raw_server(close_after_answer) as server:
        for _ in range(3):
            assert (await send(client, server.url)).status == 204
            await asyncio.sleep(0.05)
    assert (len(requests), server.connections) == (3, 3)


# --- the idle pool ----------------------------------------------------------------------------


async def test_idle_connections_are_closed_when_they_expire_without_further_use() -> None:
    closed = asyncio.Event()

    async def wait_for_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)
        await writer.drain()
        assert await reader.read() == b""  # until the client closes
        closed.set()

    quick = HttpClient(idle_timeout=0.2, policy=LOCAL)
    try:
        async with raw_server(wait_for_close) as server:
            await send(quick, server.url)
            assert quick.idle_connections == 1
            await asyncio.wait_for(closed.wait(), 5)  # nothing else was sent meanwhile
        assert quick.idle_connections == 0
    finally:
        await quick.close()


async def test_a_servers_keep_alive_timeout_shortens_the_idle_expiry() -> None:
    answer = b"HTTP/1.1 204 No Content\r\nKeep-Alive: timeout=1\r\n\r\n"  # dropped after 0 s idle
    clock = VirtualClock()
    quick = HttpClient(idle_timeout=60, policy=LOCAL, clock=clock)
    try:
        async with raw_server(answering(answer, answer)) as server:
            await send(quick, server.url)
            clock.advance(0.01)
            await send(quick, server.url)
        assert server.connections == 2  # the first was not reused past its server's timeout
    finally:
        await quick.close()


async def test_idle_connections_are_capped_over_all_origins() -> None:
    capped = HttpClient(max_idle=2, policy=LOCAL)
    try:
        async with (
            raw_server(answering(OK)) as a,
            raw_server(answering(OK)) as b,
            raw_server(answering(OK)) as c,
        ):
            for server in (a, b, c):
                await send(capped, server.url)
            assert capped.idle_connections == 2
            for server in (b, c):  # the longest idle one (a's) went
                await send(capped, server.url)
            await send(capped, a.url)
        assert (a.connections, b.connections, c.connections) == (2, 1, 1)
    finally:
        await capped.close()


async def test_no_time_left_means_nothing_is_written(client: HttpClient) -> None:
    requests: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while request := await read_request(reader):
            requests.append(request)
            writer.write(OK)
            await writer.drain()

    async with raw_server(record) as server:
        await send(client, server.url)  # a kept-alive connection waits in the pool
        with pytest.raises(TimeoutError):
            await client.request("POST", server.url + "/", {}, b"late", timeout=0)
        await send(client, server.url)
    assert [r.endswith(b"late") for r in requests] == [False, False]


async def test_an_answer_that_arrives_as_the_deadline_passes_is_in_time() -> None:
    """The whole answer reaches the socket while the event loop is busy past the deadline:
    its bytes and the deadline are handled in the same loop iteration. The answer counts
    (a timeout here would send a delivered webhook again)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    received, busy = threading.Event(), threading.Event()

    def answer_soon() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            received.set()
            busy.wait(5)  # answers while the loop is busy (below)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            conn.recv(1)  # until the client closes

    threading.Thread(target=answer_soon, daemon=True).start()
    client = HttpClient(policy=LOCAL)
    try:
        started = time.monotonic()
        url = f"http://127.0.0.1:{port}/"
        sending = asyncio.create_task(client.request("GET", url, {}, b"", timeout=1.0))
        assert await asyncio.to_thread(received.wait, 5)  # written, and waiting for its answer
        # The loop is busy: the answer arrives, the deadline passes.
        busy.set()
        # a stall, not a wait: the loop blocked past the deadline is the case under test
        time.sleep(max(0.0, started + 1.0 - time.monotonic()) + 0.2)  # noqa: ASYNC251
        response = await sending
    finally:
        await client.close()
        listener.close()
    assert (response.status, response.body, response.complete) == (200, b"ok", True)
