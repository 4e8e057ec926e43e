"""Tenant fairness after seed 004: how long small tenants wait behind a big tenant's backlog.

    python -m tools.bench.fairness http://127.0.0.1:7337 [big=2000] [small_tenants=10] [each=5]

Against a running Workly (dev or serve). It starts its own endpoint on 127.0.0.1 that takes
20 ms per request, creates a queue with max_concurrency 4 (seed 004's four workers), enqueues
the big tenant's tasks, then, one second later, each small tenant's. Run twice: once with a
`tenant` on every task (fair: round-robin over tenants) and once without (plain FIFO). The
wait of a task is its arrival at the endpoint minus the moment its enqueue was acknowledged.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from typing import Any

import aiohttp
from aiohttp import web

WORK_SECONDS = 0.020
WORKERS = 4


class Endpoint:
    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.arrivals.setdefault(request.match_info["name"], time.perf_counter())
        await asyncio.sleep(WORK_SECONDS)
        return web.Response(status=204)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/f/{name}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def _enqueue(
    session: aiohttp.ClientSession, base: str, queue: str, tasks: list[dict[str, Any]]
) -> float:
    for start in range(0, len(tasks), 1000):
        async with session.post(
            f"{base}/v1/queues/{queue}/tasks/batch", json={"tasks": tasks[start : start + 1000]}
        ) as response:
            if response.status != 201:
                raise SystemExit(f"enqueue failed: {response.status} {await response.text()}")
    return time.perf_counter()


async def run(base: str, fair: bool, big: int, small_tenants: int, each: int) -> dict[str, float]:
    endpoint = Endpoint()
    await endpoint.start()
    queue = f"fairness-{'fair' if fair else 'fifo'}-{uuid.uuid4().hex[:6]}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.put(f"{base}/v1/queues/{queue}", json={"max_concurrency": WORKERS}) as r:
                r.raise_for_status()

            def task(tenant: str, n: int) -> dict[str, Any]:
                found: dict[str, Any] = {"url": f"{endpoint.url}/f/{tenant}-{n}"}
                return {**found, "tenant": tenant} if fair else found

            started = time.perf_counter()
            await _enqueue(session, base, queue, [task("big", n) for n in range(big)])
            await asyncio.sleep(1.0)
            small = [task(f"small{t}", n) for t in range(small_tenants) for n in range(each)]
            small_at = await _enqueue(session, base, queue, small)
            names = [f"small{t}-{n}" for t in range(small_tenants) for n in range(each)]
            deadline = time.perf_counter() + 120
            while len(endpoint.arrivals) < big + len(small) and time.perf_counter() < deadline:
                await asyncio.sleep(0.05)
    finally:
        await endpoint.stop()
    waits = sorted(endpoint.arrivals[name] - small_at for name in names)
    big_done = max(v for k, v in endpoint.arrivals.items() if k.startswith("big-")) - started
    return {
        "small_median": statistics.median(waits),
        "small_p95": waits[int(0.95 * (len(waits) - 1))],
        "small_last": waits[-1],
        "big_done": big_done,
    }


async def main(base: str, big: int, small_tenants: int, each: int) -> None:
    print(
        f"{big} tasks of one tenant, then {small_tenants} tenants with {each} each; {WORKERS} in flight, "
        f"{WORK_SECONDS * 1000:.0f} ms each"
    )
    results = {}
    for fair in (False, True):
        results[fair] = await run(base, fair, big, small_tenants, each)
        r = results[fair]
        print(
            f"{'fair (tenants)' if fair else 'plain FIFO':>15}: small tenants wait median "
            f"{r['small_median'] * 1000:,.0f} ms, p95 {r['small_p95'] * 1000:,.0f} ms, last "
            f"{r['small_last'] * 1000:,.0f} ms; big tenant done after {r['big_done']:.2f} s"
        )
    ratio = results[False]["small_median"] / results[True]["small_median"]
    print(f"plain FIFO makes the small tenants wait {ratio:.0f} times longer (median)")


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        raise SystemExit(__doc__)
    numbers = [int(a) for a in args[1:]] + [2000, 10, 5][len(args) - 1 :]
    asyncio.run(main(args[0].rstrip("/"), *numbers[:3]))
