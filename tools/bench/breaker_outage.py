"""A receiver down for a while: what the circuit breaker costs it, and how fast the backlog
drains once it is back.

    python -m tools.bench.breaker_outage SERVER_URL TOKEN [down_seconds] [events]

Against a running server (workly dev, or workly serve with WORKLY_OUTBOUND_ALLOW opening
127.0.0.1): registers one endpoint pointing at a receiver this script runs on 127.0.0.1,
publishes ``events`` events spread over the first 80% of ``down_seconds`` while the receiver
answers 503, then lets it answer 204 and waits until every event arrived once. Prints the
attempts the receiver saw while down, when the first success came after it was back, and
the drain rate. Bounded: it stops by itself, after down_seconds + 2 hours at most.
"""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp
from aiohttp import web


async def main(server: str, token: str, down_seconds: float, events: int) -> None:
    state = {"down": True}
    while_down: list[float] = []
    delivered: dict[str, float] = {}

    async def receive(request: web.Request) -> web.Response:
        await request.read()
        if state["down"]:
            while_down.append(time.monotonic())
            return web.Response(status=503)
        delivered.setdefault(request.headers["webhook-id"], time.monotonic())
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", receive)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    headers = {"authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(base_url=server, headers=headers) as http:
        async with http.post("/v1/endpoints", json={"url": f"http://127.0.0.1:{port}/hook"}) as response:
            assert response.status == 201, await response.text()
            endpoint = await response.json()
        started = time.monotonic()
        spacing = down_seconds * 0.8 / events
        for n in range(events):
            async with http.post("/v1/events", json={"type": "outage.test", "payload": {"n": n}}) as response:
                assert response.status == 201, await response.text()
            await asyncio.sleep(max(0.0, started + (n + 1) * spacing - time.monotonic()))
        await asyncio.sleep(max(0.0, started + down_seconds - time.monotonic()))
        state["down"] = False
        back = time.monotonic()
        print(f"receiver down {down_seconds:.0f} s, {events} events; it saw {len(while_down)} attempts")
        deadline = back + 7200
        while len(delivered) < events and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        first, last = min(delivered.values()), max(delivered.values())
        print(f"first success {first - back:.1f} s after it was back (the next probe)")
        rate = (len(delivered) - 1) / (last - first) if last > first else float("inf")
        print(
            f"{len(delivered)} delivered once each; backlog drained in {last - first:.2f} s ({rate:,.0f}/s)"
        )
        async with http.get(f"/v1/endpoints/{endpoint['id']}/tasks", params={"limit": 500}) as response:
            tasks = (await response.json())["tasks"]
        print(f"attempts recorded on the newest 500 tasks: {sum(t['attempts'] for t in tasks)}")
    await runner.cleanup()


if __name__ == "__main__":
    argv = sys.argv[1:]
    asyncio.run(
        main(
            argv[0],
            argv[1],
            float(argv[2]) if len(argv) > 2 else 600.0,
            int(argv[3]) if len(argv) > 3 else 1000,
        )
    )
