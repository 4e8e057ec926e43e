"""Receivers that try to exhaust the dispatcher: a gzip bomb, an endless body, a header
flood, a slow drip. Each attempt ends with a bounded response or a clear error, and the
memory held for it stays small. All servers listen on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc

import pytest

from tests.support.raw_server import raw_server, read_request
from workly.dispatch.http import HttpClient, ProtocolError
from workly.ssrf_guard import LOOPBACK, OutboundPolicy

LOCAL = OutboundPolicy(LOOPBACK)
MB = 1024 * 1024


async def test_a_gzip_bomb_is_not_decompressed() -> None:
    bomb = gzip.compress(b"\0" * (64 * MB), compresslevel=9)  # 64 MB of zeros in ~64 KB

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        head = f"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: {len(bomb)}\r\n\r\n"
        writer.write(head.encode() + bomb)
        await writer.drain()

    client = HttpClient(max_body=2048, policy=LOCAL)
    tracemalloc.start()
    async with raw_server(handler) as server:
        response = await client.request("GET", server.url + "/", {}, b"")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    await client.close()
    assert response.status == 200
    assert response.body == bomb[:2048]  # the compressed bytes, cut: nothing was inflated
    assert peak < 4 * MB, peak


async def test_an_endless_body_is_cut_at_the_snippet_and_its_connection_dropped() -> None:
    sent = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        for _ in range(2000):  # 128 MB if nobody stops listening
            writer.write(chunk)
            sent += len(chunk)
            await writer.drain()

    client = HttpClient(max_body=2048, policy=LOCAL)
    tracemalloc.start()
    async with raw_server(handler) as server:
        response = await client.request("GET", server.url + "/", {}, b"")
        await server.until_closed(1)  # the sender stopped: its writes failed on the closed socket
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    await client.close()
    assert (response.status, len(response.body)) == (200, 2048)
    assert sent < 16 * MB  # the client hung up; the sender was stopped by the closed socket
    assert peak < 4 * MB, peak


async def test_a_header_flood_is_a_protocol_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n")
        for n in range(10_000):  # ~1 MB of headers
            writer.write(f"x-flood-{n}: {'y' * 100}\r\n".encode())
        writer.write(b"content-length: 0\r\n\r\n")
        await writer.drain()

    client = HttpClient(policy=LOCAL)
    async with raw_server(handler) as server:
        with pytest.raises(ProtocolError, match="headers exceed 64 KiB"):
            await client.request("GET", server.url + "/", {}, b"")
    await client.close()


@pytest.mark.parametrize("drip", ["body", "head"])
async def test_a_slow_drip_ends_at_the_attempt_timeout(drip: str) -> None:
    """A body that drips keeps the status of the head that came in time; a head that
    drips is a timeout. Either way the attempt ends at its timeout, not after 50 s."""
    head = b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n"

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        if drip == "body":
            writer.write(head)
        for index in range(1000):  # one byte every 50 ms: 50 s if waited for
            writer.write(b"x" if drip == "body" else head[index : index + 1] or b"x")
            await writer.drain()
            await asyncio.sleep(0.05)

    client = HttpClient(policy=LOCAL)
    started = asyncio.get_running_loop().time()
    async with raw_server(handler) as server:
        if drip == "body":
            response = await client.request("GET", server.url + "/", {}, b"", timeout=0.5)
            assert (response.status, response.complete) == (200, False)
            assert 1 <= len(response.body) <= 20
        else:
            with pytest.raises(TimeoutError):
                await client.request("GET", server.url + "/", {}, b"", timeout=0.5)
    assert asyncio.get_running_loop().time() - started < 5
    await client.close()


async def test_one_header_value_that_never_ends_is_a_protocol_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nx-big: ")
        for _ in range(1000):  # 64 MB of one value, never ended
            writer.write(b"y" * 65536)
            await writer.drain()

    client = HttpClient(policy=LOCAL)
    tracemalloc.start()
    async with raw_server(handler) as server:
        with pytest.raises(ProtocolError, match="headers exceed 64 KiB"):
            async with asyncio.timeout(10):
                await client.request("GET", server.url + "/", {}, b"")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    await client.close()
    assert peak < 4 * MB, peak
