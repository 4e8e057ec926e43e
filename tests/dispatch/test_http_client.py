"""The delivery HTTP client against raw servers on 127.0.0.1 that answer byte for byte."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import pytest
import trustme

from tests.support.clock import VirtualClock
from tests.support.raw_server import (
    OK,
    answering,
    answering_then_closing,
    forever,
    raw_server,
    read_request,
)
from workly.dispatch.http import ConnectError, HttpClient, NotSent, ProtocolError
from workly.ssrf_guard import LOOPBACK, OutboundPolicy

LOCAL = OutboundPolicy(LOOPBACK)  # the receivers here listen on 127.0.0.1


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    http = HttpClient(max_body=16, policy=LOCAL)
    yield http
    await http.close()


async def test_a_request_goes_out_as_given_and_the_answer_comes_back(client: HttpClient) -> None:
    seen: list[bytes] = []
    answer = b"HTTP/1.1 201 Created\r\nRetry-After: 7\r\nContent-Length: 5\r\n\r\nhello"
    async with raw_server(answering(answer, record=seen)) as server:
        response = await client.request("PUT", server.url + "/a%20b?x=1", {"X-Custom": "v"}, b"\x00\xff")
    assert (response.status, response.headers["retry-after"], response.body) == (201, "7", b"hello")
    head, _, body = seen[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"PUT /a%20b?x=1 HTTP/1.1"
    assert b"X-Custom: v" in lines
    assert b"content-length: 2" in lines
    assert body == b"\x00\xff"


async def test_connections_are_kept_alive_and_reused(client: HttpClient) -> None:
    async with raw_server(answering(OK, OK, OK)) as server:
        for _ in range(3):
            assert (await client.request("POST", server.url + "/", {}, b"x")).status == 204
    assert server.connections == 1


async def test_may_send_is_asked_once_connected_and_a_no_writes_nothing(client: HttpClient) -> None:
    seen: list[bytes] = []
    asked: list[int] = []

    def refuse() -> bool:
        asked.append(client.idle_connections)  # connected: the connection is not in the pool
        return False

    async with raw_server(answering(OK, record=seen)) as server:
        with pytest.raises(NotSent):
            await client.request("POST", server.url + "/", {}, b"x", may_send=refuse)
        assert (asked, client.idle_connections) == ([0], 1)  # nothing written: it stays usable
        assert (await client.request("POST", server.url + "/", {}, b"y", may_send=lambda: True)).status == 204
    assert server.connections == 1
    assert len(seen) == 1 and seen[0].endswith(b"\r\n\r\ny")  # the refused request never went out


async def test_framing_headers_from_the_task_are_not_sent_twice(client: HttpClient) -> None:
    seen: list[bytes] = []
    async with raw_server(answering(OK, record=seen)) as server:
        headers = {"Content-Length": "999", "Host": "evil", "Transfer-Encoding": "chunked", "Connection": "x"}
        await client.request("POST", server.url + "/", headers, b"abc")
    head = seen[0].split(b"\r\n\r\n")[0].lower()
    assert head.count(b"content-length") == 1
    assert b"content-length: 3" in head
    assert b"evil" not in head
    assert b"transfer-encoding" not in head


async def test_a_chunked_body_is_read(client: HttpClient) -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    async with raw_server(answering(chunked, OK)) as server:
        response = await client.request("GET", server.url + "/", {}, b"")
        again = await client.request("GET", server.url + "/", {}, b"")
    assert (response.status, response.body, again.status) == (200, b"abcde", 204)
    assert server.connections == 1


async def test_a_long_body_is_cut_and_its_connection_not_reused(client: HttpClient) -> None:
    long = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000
    async with raw_server(answering(long, OK)) as server:
        response = await client.request("GET", server.url + "/", {}, b"")
        await client.request("GET", server.url + "/", {}, b"")
    assert response.body == b"x" * 16
    assert server.connections == 2


async def test_a_body_ended_by_closing_the_connection(client: HttpClient) -> None:
    async with raw_server(answering_then_closing(b"HTTP/1.0 200 OK\r\n\r\nbye")) as server:
        response = await client.request("GET", server.url + "/", {}, b"")
    assert (response.status, response.body) == (200, b"bye")


async def test_head_does_not_wait_for_the_announced_body(client: HttpClient) -> None:
    head_answer = b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n"
    async with raw_server(answering(head_answer)) as server:
        response = await asyncio.wait_for(client.request("HEAD", server.url + "/", {}, b""), 5)
    assert (response.status, response.body) == (200, b"")


async def test_interim_answers_are_skipped(client: HttpClient) -> None:
    early = (
        b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    )
    async with raw_server(answering(early)) as server:
        assert (await client.request("POST", server.url + "/", {}, b"")).status == 202


async def test_redirects_are_returned_not_followed(client: HttpClient) -> None:
    redirect = b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/elsewhere\r\nContent-Length: 0\r\n\r\n"
    async with raw_server(answering(redirect)) as server:
        response = await client.request("POST", server.url + "/", {}, b"")
    assert (response.status, response.headers["location"]) == (302, "http://127.0.0.1:9/elsewhere")
    assert server.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_replaced(client: HttpClient) -> None:
    async def one_per_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)  # keep-alive by HTTP/1.1 default, then closed anyway (idle timeout)
        await writer.drain()

    async with raw_server(one_per_connection) as server:
        first = await client.request("POST", server.url + "/", {}, b"1")
        await server.until_closed(1)  # its FIN is in the client's socket (loopback)
        second = await client.request("POST", server.url + "/", {}, b"2")
    assert (first.status, second.status, server.connections) == (204, 204, 2)


async def test_a_timeout_closes_the_connection(client: HttpClient) -> None:
    async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await forever()

    async with raw_server(never_answers) as server:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await client.request("POST", server.url + "/", {}, b"")
    assert client.idle_connections == 0


async def test_connection_refused_is_a_connect_error(client: HttpClient) -> None:
    with pytest.raises(ConnectError):
        await client.request("POST", "http://127.0.0.1:9/", {}, b"")  # port 9: nothing listens


@pytest.mark.parametrize(
    "garbage",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 abc\r\n\r\n", b""],
    ids=["not http", "bad status", "silence"],
)
async def test_a_peer_that_does_not_speak_http_is_a_protocol_error(
    client: HttpClient, garbage: bytes
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(garbage)
        await writer.drain()

    async with raw_server(answer) as server:
        with pytest.raises(ProtocolError):
            await client.request("POST", server.url + "/", {}, b"")


async def test_https_with_a_trusted_certificate() -> None:
    authority = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_tls)
    client_tls = ssl.create_default_context()
    authority.configure_trust(client_tls)
    trusted, untrusted = HttpClient(ssl_context=client_tls, policy=LOCAL), HttpClient(policy=LOCAL)
    try:
        async with raw_server(answering(OK), tls=server_tls) as server:
            assert (await trusted.request("POST", server.url + "/", {}, b"")).status == 204
            with pytest.raises(ConnectError):
                await untrusted.request("POST", server.url + "/", {}, b"")
    finally:
        await trusted.close()
        await untrusted.close()


async def test_an_ascii_url_goes_out_exactly_as_given(client: HttpClient) -> None:
    seen: list[bytes] = []
    async with raw_server(answering(OK, record=seen)) as server:
        await client.request("GET", server.url + "/a/../b/%2e%2e/%7e?q=%41", {}, b"")
    assert seen[0].split(b"\r\n")[0] == b"GET /a/../b/%2e%2e/%7e?q=%41 HTTP/1.1"


async def test_bytes_arriving_on_an_idle_connection_retire_it(client: HttpClient) -> None:
    answered, stray_sent = asyncio.Event(), asyncio.Event()

    async def then_a_stray_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)
        await answered.wait()  # the connection is idle in the client's pool
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")  # nobody asked for it
        await writer.drain()  # on loopback: in the client's socket once written
        stray_sent.set()
        await answering(OK)(reader, writer)

    async with raw_server(then_a_stray_answer) as server:
        assert (await client.request("POST", server.url + "/", {}, b"")).status == 204
        answered.set()
        await stray_sent.wait()
        assert (await client.request("POST", server.url + "/", {}, b"")).status == 204
    assert server.connections == 2  # the second answer was not taken for the next request's


async def test_expired_idle_connections_are_closed_not_kept(client: HttpClient) -> None:
    clock = VirtualClock()
    quick = HttpClient(idle_timeout=0.05, policy=LOCAL, clock=clock)
    try:
        async with raw_server(answering(OK, OK, OK)) as server:
            await asyncio.gather(*(quick.request("POST", server.url + "/", {}, b"") for _ in range(3)))
            assert quick.idle_connections == 3
            clock.advance(0.1)
            await quick.request("POST", server.url + "/", {}, b"")
            assert quick.idle_connections == 1
        assert server.connections == 4
    finally:
        await quick.close()
