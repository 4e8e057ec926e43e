"""Enqueue requests per second through the HTTP API, closed loop (no deliveries measured).

    python -m tools.bench.enqueue_api http://127.0.0.1:7337 [seconds] [concurrency]

Run it against a server started with WORKLY_DISPATCH=false to see the API's own cost.
Tasks target http://127.0.0.1:9/ (the discard port): nothing is delivered anywhere.
"""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp


async def main(base: str, seconds: float, concurrency: int) -> None:
    url = f"{base.rstrip('/')}/v1/queues/bench-api/tasks"
    body = b'{"url": "http://127.0.0.1:9/", "body": {"n": 1}}'
    done = errors = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers={"content-type": "application/json"}) as s:
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done, errors
            while time.perf_counter() < deadline:
                async with s.post(url, data=body) as response:
                    await response.read()
                    if response.status == 201:
                        done += 1
                    else:
                        errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    print(f"{done / elapsed:,.0f} enqueues/s ({errors} errors) at concurrency {concurrency}")


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(
        main(args[0], float(args[1]) if len(args) > 1 else 5.0, int(args[2]) if len(args) > 2 else 64)
    )
