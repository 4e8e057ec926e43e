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
import time
from typing import Any

import aiohttp

from tools.bench.open_loop import latency_summary, publish_open_loop

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


def _live_event(sent: float) -> dict[str, Any]:
    return {"type": "bench.live", "tenant": TENANT, "payload": {"at": sent}}


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
        publisher = asyncio.create_task(publish_open_loop(http, args.rate, stop, samples, _live_event))
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
    print("publishing before:", latency_summary([d for sent, d in samples if sent < replay_began]))
    print(
        "publishing during:",
        latency_summary([d for sent, d in samples if replay_began <= sent < replay_ended]),
    )


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
