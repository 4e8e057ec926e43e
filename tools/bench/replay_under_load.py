"""How long replaying many events takes, and what it does to publishing meanwhile (issue 42).

    python -m tools.bench.replay_under_load SERVER_URL [--events 100000] [--rate 200] [--token T]

Against a running server with its dispatcher on (the replay's operation runs there): it
publishes ``--events`` events of tenant ``replay-bench`` (closed loop, 32 at a time), makes a
disabled endpoint of that tenant (a replay gives a disabled endpoint what it missed, held
until it is enabled, so nothing is sent anywhere), then publishes at ``--rate`` events/s open
loop, one request each, while it replays every one of those events to the endpoint. It
prints how long the replay took and the publish latency (p50, p99, max) before and during
it: the target is that no publish waits more than 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import aiohttp

TENANT = "replay-bench"


async def seed(http: aiohttp.ClientSession, count: int) -> None:
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            body = {"type": "bench.seeded", "tenant": TENANT, "payload": {"n": left}, "labels": {"r": "eu"}}
            async with http.post("/v1/events", json=body) as response:
                assert response.status == 201, await response.text()

    await asyncio.gather(*(worker() for _ in range(32)))


async def live(
    http: aiohttp.ClientSession, rate: float, stop: asyncio.Event, out: list[tuple[float, float]]
) -> None:
    """Open loop: one publish every 1/rate s, whatever the answers; (sent at, seconds taken)."""

    async def one(sent: float) -> None:
        body = {"type": "bench.live", "tenant": TENANT, "payload": {"at": sent}}
        async with http.post("/v1/events", json=body) as response:
            assert response.status == 201, await response.text()
        out.append((sent, time.perf_counter() - sent))

    pending: set[asyncio.Task[None]] = set()
    start = time.perf_counter()
    n = 0
    while not stop.is_set():
        n += 1
        await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
        task = asyncio.create_task(one(time.perf_counter()))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)


def _summary(latencies: list[float]) -> str:
    if not latencies:
        return "none"
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{len(ordered)} publishes, p50 {statistics.median(ordered) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"
    )


async def main(args: argparse.Namespace) -> None:
    headers = {"authorization": f"Bearer {args.token}"} if args.token else {}
    async with aiohttp.ClientSession(base_url=args.server, headers=headers) as http:
        seeded_from = time.time()
        began = time.perf_counter()
        await seed(http, args.events)
        print(f"seeded {args.events:,} events in {time.perf_counter() - began:.1f} s")
        body: dict[str, Any] = {"url": "http://127.0.0.1:9/", "tenant": TENANT, "filter": {"labels.r": "eu"}}
        async with http.post("/v1/endpoints", json=body) as response:
            endpoint = (await response.json())["id"]
        async with http.post(f"/v1/endpoints/{endpoint}/disable") as response:
            assert response.status == 200, await response.text()
        stop = asyncio.Event()
        samples: list[tuple[float, float]] = []
        publisher = asyncio.create_task(live(http, args.rate, stop, samples))
        await asyncio.sleep(3)  # latency before the replay
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seeded_from - 1))
        replay_began = time.perf_counter()
        async with http.post(f"/v1/endpoints/{endpoint}/replay", json={"since": since}) as response:
            operation = (await response.json())["id"]
        while True:
            async with http.get(f"/v1/operations/{operation}") as response:
                state = await response.json()
            if state["state"] != "running":
                break
            await asyncio.sleep(0.2)
        replay_ended = time.perf_counter()
        stop.set()
        await publisher
        async with http.delete(f"/v1/endpoints/{endpoint}") as response:
            assert response.status == 204, await response.text()
    took = replay_ended - replay_began
    print(
        f"replay {state['state']}: {state['changed']:,} deliveries made of {state['matched']:,} events "
        f"in {took:.1f} s ({state['changed'] / took:,.0f}/s)"
    )
    print("publishing before:", _summary([d for sent, d in samples if sent < replay_began]))
    print("publishing during:", _summary([d for sent, d in samples if replay_began <= sent < replay_ended]))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("server")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--token", default=None)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_arguments()))
