"""Events published per second through the HTTP API, each fanned out to N endpoints.

    python -m tools.bench.publish_api SERVER_URL [endpoints] [seconds] [concurrency] [token]

Run it against a server started with WORKLY_DISPATCH=false: it measures publishing (the
event and its N delivery tasks stored in one transaction), not delivery. It registers
``endpoints`` endpoints subscribed to bench.*, pointing at the discard port 127.0.0.1:9
(nothing is delivered anywhere), publishes closed loop, then deletes them. Prints events/s
and the delivery tasks stored per second.
"""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp


async def main(base: str, endpoints: int, seconds: float, concurrency: int, token: str | None) -> None:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(base_url=base, headers=headers, connector=connector) as http:
        created = []
        for _ in range(endpoints):
            body = {"url": "http://127.0.0.1:9/", "event_types": ["bench.*"], "tenant": "bench"}
            async with http.post("/v1/endpoints", json=body) as response:
                assert response.status == 201, await response.text()
                created.append((await response.json())["id"])
        event = {"type": "bench.published", "tenant": "bench", "payload": {"order": 1042, "total": "12.00"}}
        done = errors = deliveries = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done, errors, deliveries
            while time.perf_counter() < deadline:
                async with http.post("/v1/events", json=event) as response:
                    answer = await response.json()
                    if response.status == 201:
                        done += 1
                        deliveries += len(answer["deliveries"])
                    else:
                        errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        for endpoint_id in created:
            async with http.delete(f"/v1/endpoints/{endpoint_id}") as response:
                assert response.status == 204, await response.text()
    print(
        f"{endpoints} endpoints: {done / elapsed:,.0f} events/s, {deliveries / elapsed:,.0f} deliveries/s "
        f"({errors} errors) at concurrency {concurrency}"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(
        main(
            args[0],
            int(args[1]) if len(args) > 1 else 1,
            float(args[2]) if len(args) > 2 else 5.0,
            int(args[3]) if len(args) > 3 else 32,
            args[4] if len(args) > 4 else None,
        )
    )
