"""Happy Eyeballs (RFC 8305): an address that hangs never stalls the next one.

The hanging address is a listener on 127.0.0.2 whose accept queue is full (the kernel
drops the SYNs, as for a dead A record or a broken IPv6 path); the live one a server on
127.0.0.1 at the same port. Both on loopback."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from tests.support.raw_server import OK, answering, black_hole, raw_server
from workly.dispatch.http import ConnectError, HttpClient
from workly.dispatch.http.connect import connect_first, interleave
from workly.ssrf_guard import LOOPBACK, OutboundPolicy

LOCAL = OutboundPolicy(LOOPBACK)


async def test_a_hanging_first_address_costs_a_quarter_second_not_the_connect_budget() -> None:
    async with raw_server(answering(OK)) as server:
        port = int(server.url.rsplit(":", 1)[1])

        async def dead_first(host: str, port: int) -> list[str]:
            return ["127.0.0.2", "127.0.0.1"]

        client = HttpClient(policy=LOCAL, resolver=dead_first, connect_timeout=10)
        try:
            with black_hole("127.0.0.2", port):
                started = time.monotonic()
                response = await client.request("POST", f"http://example.test:{port}/", {}, b"", timeout=20)
                took = time.monotonic() - started
        finally:
            await client.close()
    assert response.status == 204
    assert took < 5, took  # about 0.25 s; without Happy Eyeballs the full 10 s budget, then a failure


async def test_when_every_address_hangs_the_connect_budget_ends_it() -> None:
    async def dead(host: str, port: int) -> list[str]:
        return ["127.0.0.2", "127.0.0.3"]

    client = HttpClient(policy=LOCAL, resolver=dead, connect_timeout=0.6)
    try:
        with (
            black_hole("127.0.0.2") as port,
            black_hole("127.0.0.3", port),
            pytest.raises(ConnectError, match=r"within 0\.6s"),
        ):
            await client.request("POST", f"http://example.test:{port}/", {}, b"", timeout=20)
    finally:
        await client.close()


async def test_refused_addresses_are_passed_at_once_and_all_failures_named() -> None:
    async def nothing_listens(host: str, port: int) -> list[str]:
        return ["127.0.0.2", "127.0.0.3"]

    client = HttpClient(policy=LOCAL, resolver=nothing_listens, happy_eyeballs_delay=30)
    try:
        started = time.monotonic()
        with pytest.raises(ConnectError) as raised:
            await client.request("POST", "http://example.test:9/", {}, b"", timeout=20)
        assert time.monotonic() - started < 5  # the next attempt did not wait out the 30 s delay
    finally:
        await client.close()
    assert "127.0.0.2" in str(raised.value) and "127.0.0.3" in str(raised.value)


@pytest.mark.parametrize(
    ("resolved", "order"),
    [
        (["::1", "::2", "1.1.1.1", "1.1.1.2"], ["::1", "1.1.1.1", "::2", "1.1.1.2"]),
        (["1.1.1.1", "::1", "::2", "::3"], ["1.1.1.1", "::1", "::2", "::3"]),
        (["1.1.1.1", "1.1.1.2"], ["1.1.1.1", "1.1.1.2"]),
        ([], []),
    ],
)
def test_families_are_interleaved_the_first_one_first(resolved: list[str], order: list[str]) -> None:
    assert interleave(resolved) == order


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_cancelled_connect_raises_and_leaves_no_socket_open() -> None:
    with black_hole("127.0.0.2") as port, black_hole("127.0.0.3", port):
        before = open_descriptors()
        connecting = asyncio.create_task(connect_first(["127.0.0.2", "127.0.0.3"], port, delay=0.01))
        async with asyncio.timeout(5):
            while open_descriptors() < before + 2:  # both attempts under way
                await asyncio.sleep(0.01)
        connecting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await connecting
        async with asyncio.timeout(5):
            while open_descriptors() > before:
                await asyncio.sleep(0.01)
