"""Publishing at a fixed rate while something else runs, and the latency it saw: what
tools/bench/replay_under_load.py and erase_under_load.py measure an operation's cost by."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

import aiohttp


async def publish_open_loop(
    http: aiohttp.ClientSession, rate: float, stop: asyncio.Event, out: list[tuple[float, float]],
    body: Callable[[float], dict[str, Any]],
) -> None:  # fmt: skip
    """One publish of ``body(sent_at)`` every 1/rate s, whatever the answers, until ``stop``;
    appends (sent at, seconds taken) to ``out``."""

    async def one(sent: float) -> None:
        async with http.post("/v1/events", json=body(sent)) as response:
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


def latency_summary(latencies: list[float]) -> str:
    if not latencies:
        return "none"
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{len(ordered)} publishes, p50 {statistics.median(ordered) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"
    )
