"""CPU per delivery request: aiohttp against Workly's HttpClient, to the load test's sink.

    python -m tools.bench.http_clients [requests] [uvloop]

``uvloop``: on uvloop's event loop, which `workly dev`/`serve` run on (uvicorn picks it), instead
of asyncio's own.

Both clients post the same small signed-looking request with 64 in flight to a no-op
sink in the same process (so the figures include the sink's share, the same for both).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

import aiohttp

from workly.dispatch.http import HttpClient
from workly.loadtest.sink import Sink
from workly.ssrf_guard import LOOPBACK, OutboundPolicy

LOCAL = OutboundPolicy(LOOPBACK)  # the receivers here listen on 127.0.0.1

HEADERS = {
    "user-agent": "Workly/bench",
    "webhook-id": "task_x",
    "webhook-timestamp": "1",
    "webhook-signature": "v1,x",
}
BODY = b'{"n":1}'


async def measure(label: str, send: Callable[[], Awaitable[None]], requests: int) -> None:
    in_flight = asyncio.Semaphore(64)

    async def one() -> None:
        async with in_flight:
            await send()

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(requests)))
    elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    print(f"{label:<12} {requests / elapsed:>8,.0f} req/s   {used / requests * 1e6:6.1f} us CPU per request")


async def main(requests: int) -> None:
    sink = Sink()
    await sink.start()
    url = sink.url + "/d/1"
    connector = aiohttp.TCPConnector(limit=100)
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as session:

        async def with_aiohttp() -> None:
            timeout = aiohttp.ClientTimeout(total=30)
            async with session.post(
                url, data=BODY, headers=HEADERS, allow_redirects=False, timeout=timeout
            ) as r:
                await r.content.read(2048)

        await measure("aiohttp", with_aiohttp, requests)
    client = HttpClient(policy=LOCAL)

    async def with_workly() -> None:
        await client.request("POST", url, HEADERS, BODY, timeout=30)  # as the deliverer calls it

    await measure("HttpClient", with_workly, requests)
    await client.close()
    await sink.stop()


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    if "uvloop" in sys.argv[2:]:
        import uvloop

        uvloop.run(main(count))
    else:
        asyncio.run(main(count))
