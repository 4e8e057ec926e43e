"""How long erasing a large tenant takes, and what it does to publishing meanwhile (issue 43).

    python -m tools.bench.erase_under_load SERVER_URL [--deliveries 100000] [--rate 500] [--token T]

Against a running server with its dispatcher on, allowed to deliver to 127.0.0.1 (as
`workly dev` is): this tool runs a no-op receiver on 127.0.0.1, gives tenant ``erase-bench``
two endpoints there and publishes ``--deliveries`` / 2 events to it (closed loop, 32 at a
time), waits until they are delivered, then publishes at ``--rate`` events/s open loop for
another tenant (one endpoint, on the same receiver) while it erases ``erase-bench``. It prints
how long the erasure took and the publish latency (p50, p99, max) before and during it.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import aiohttp
from aiohttp import web

from tools.bench.open_loop import latency_summary, publish_open_loop

ERASED, LIVE = "erase-bench", "erase-bench-live"


async def receiver() -> tuple[web.AppRunner, str]:
    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/{tail:.*}", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def endpoint(http: aiohttp.ClientSession, url: str, tenant: str) -> str:
    async with http.post("/v1/endpoints", json={"url": url, "tenant": tenant}) as response:
        assert response.status == 201, await response.text()
        found: str = (await response.json())["id"]
        return found


async def seed(http: aiohttp.ClientSession, events: int) -> None:
    left = events

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            body = {"type": "bench.seeded", "tenant": ERASED, "payload": {"n": left, "pad": "x" * 100}}
            async with http.post("/v1/events", json=body) as response:
                assert response.status == 201, await response.text()

    await asyncio.gather(*(worker() for _ in range(32)))


async def delivered(http: aiohttp.ClientSession, endpoints: list[str]) -> None:
    """Until no delivery of these endpoints is ready or running."""
    while True:
        waiting = 0
        for endpoint_id in endpoints:
            async with http.get(f"/v1/queues/{endpoint_id}") as response:
                counts = (await response.json())["counts"]
            waiting += counts["ready"] + counts["running"]
        if not waiting:
            return
        await asyncio.sleep(1)


def _live_event(sent: float) -> dict[str, Any]:
    return {"type": "bench.live", "tenant": LIVE, "payload": {"at": sent}}


async def main(args: argparse.Namespace) -> None:
    headers = {"authorization": f"Bearer {args.token}"} if args.token else {}
    runner, sink = await receiver()
    try:
        async with aiohttp.ClientSession(base_url=args.server, headers=headers) as http:
            erased = [await endpoint(http, f"{sink}/erased/{n}", ERASED) for n in range(2)]
            await endpoint(http, f"{sink}/live", LIVE)
            began = time.perf_counter()
            await seed(http, args.deliveries // 2)
            await delivered(http, erased)
            took = time.perf_counter() - began
            print(f"seeded and delivered {args.deliveries:,} deliveries in {took:.1f} s")
            stop = asyncio.Event()
            samples: list[tuple[float, float]] = []
            publisher = asyncio.create_task(publish_open_loop(http, args.rate, stop, samples, _live_event))
            await asyncio.sleep(5)  # latency before the erasure
            erase_began = time.perf_counter()
            async with http.delete(f"/v1/tenants/{ERASED}") as response:
                assert response.status == 202, await response.text()
                operation = (await response.json())["id"]
            state: dict[str, Any] = {}
            while True:
                async with http.get(f"/v1/operations/{operation}") as response:
                    state = await response.json()
                if state["state"] != "running":
                    break
                await asyncio.sleep(0.2)
            erase_ended = time.perf_counter()
            await asyncio.sleep(3)  # latency after it
            stop.set()
            await publisher
    finally:
        await runner.cleanup()
    took = erase_ended - erase_began
    print(
        f"erase {state['state']}: {state['changed']:,} rows (events and deliveries) of {state['matched']:,} "
        f"in {took:.1f} s ({state['changed'] / took:,.0f}/s)"
    )
    print("publishing before:", latency_summary([d for sent, d in samples if sent < erase_began]))
    print(
        "publishing during:", latency_summary([d for sent, d in samples if erase_began <= sent < erase_ended])
    )
    print("publishing after: ", latency_summary([d for sent, d in samples if sent >= erase_ended]))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("server")
    parser.add_argument("--deliveries", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--token", default=None)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_arguments()))
