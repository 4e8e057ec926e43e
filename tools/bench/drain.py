"""Drain a backlog: how fast a server delivers tasks that are already stored, beside the bare hop.

    python -m tools.bench.drain http://127.0.0.1:7337 [-token T] [-tasks 20000] [-hop 5] [-json out.json]

1. The bare hop: a plain client posting to the same no-op sink, 64 requests in flight, for
   ``-hop`` seconds: Workly's own HTTP client (the one the server delivers with) and aiohttp
   (the client of the issue's figures), each alone in this process with the sink.
2. A paused queue of its own (``drain-bench``, max_concurrency 10,000) gets ``-tasks`` tasks
   through the batch API (1,000 per request, 4 requests in flight), each to ``/d/<n>``.
3. The queue is resumed; the drain rate is the tasks over the time from the resume to the last
   arrival. Every task must arrive exactly once (exit 1 otherwise). The queue is deleted.

Bounded: the sink listens on 127.0.0.1 only; the drain stops waiting after ``-timeout`` s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import aiohttp

from tools.bench.scratch_queue import BenchApi, BenchError, cancel_all, scratch_queue
from workly.loadtest.run import measure_ceiling
from workly.loadtest.sink import Sink

QUEUE = "drain-bench"
_BATCH = 1000
_IN_FLIGHT = 64


async def aiohttp_hop(sink: Sink, seconds: float) -> float:
    """Requests/s of aiohttp posting to the sink, closed loop, 64 in flight."""
    done = 0
    connector = aiohttp.TCPConnector(limit=_IN_FLIGHT)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                async with session.post(sink.url + "/hop", data=b'{"n":0}') as response:
                    await response.read()
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(_IN_FLIGHT)))
        return done / (time.perf_counter() - started)


async def _fill(api: BenchApi, sink: Sink, tasks: int, pending: list[asyncio.Task[None]]) -> None:
    limit = asyncio.Semaphore(4)

    async def batch(first: int) -> None:
        numbers = range(first, min(first + _BATCH, tasks))
        body = {"tasks": [{"url": f"{sink.url}/d/{n}", "body": {"n": n}} for n in numbers]}
        async with limit:
            status = await api.status("POST", f"/v1/queues/{QUEUE}/tasks/batch", json.dumps(body).encode())
        if status != 201:
            raise BenchError(f"a batch enqueue answered HTTP {status}")

    pending += [asyncio.create_task(batch(first)) for first in range(0, tasks, _BATCH)]
    await asyncio.gather(*pending)


async def drain(
    server: str, token: str | None, tasks: int, hop_seconds: float, wait_seconds: float
) -> dict[str, float]:
    sink = Sink()
    await sink.start()
    api = BenchApi(server, token, connections=8)
    pending: list[asyncio.Task[None]] = []
    try:
        hop_workly = await measure_ceiling(sink, hop_seconds, _IN_FLIGHT)
        hop_aiohttp = await aiohttp_hop(sink, hop_seconds)
        async with scratch_queue(api, QUEUE, {"max_concurrency": 10000, "paused": True}):
            try:
                filled = time.perf_counter()
                await _fill(api, sink, tasks, pending)
            finally:
                await cancel_all(pending)  # a failed batch: the others stop before the delete
            enqueue_seconds = time.perf_counter() - filled
            resumed = time.perf_counter()
            if (status := await api.status("POST", f"/v1/queues/{QUEUE}/resume")) != 200:
                raise BenchError(f"resuming the queue answered HTTP {status}")
            while len(sink.arrivals) < tasks and time.perf_counter() - resumed < wait_seconds:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.5)  # a duplicate would arrive by now
    finally:
        await api.close()
        await sink.stop()
    arrived = len(sink.arrivals)
    last = max(sink.arrivals.values(), default=resumed)
    return {
        "tasks": tasks,
        "arrived": arrived,
        "duplicates": sink.duplicates,
        "enqueue_per_second": tasks / enqueue_seconds,
        "drain_seconds": last - resumed,
        "drain_per_second": arrived / (last - resumed) if arrived else 0.0,
        "hop_workly_per_second": hop_workly,
        "hop_aiohttp_per_second": hop_aiohttp,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("server")
    parser.add_argument("-token", default=None)
    parser.add_argument("-tasks", type=int, default=20_000)
    parser.add_argument("-hop", type=float, default=5.0, help="seconds of each bare hop")
    parser.add_argument("-timeout", type=float, default=300.0)
    parser.add_argument("-json", dest="json_file", default=None)
    args = parser.parse_args()
    try:
        result = asyncio.run(drain(args.server.rstrip("/"), args.token, args.tasks, args.hop, args.timeout))
    except BenchError as exc:
        sys.exit(str(exc))
    rate, hop_workly, hop_aiohttp = (
        result[name] for name in ("drain_per_second", "hop_workly_per_second", "hop_aiohttp_per_second")
    )
    print(
        f"drained {result['arrived']:,.0f} of {result['tasks']:,.0f} in {result['drain_seconds']:.2f} s: "
        f"{rate:,.0f}/s ({result['duplicates']:.0f} duplicates), "
        f"enqueued at {result['enqueue_per_second']:,.0f}/s"
        f" | bare hop: Workly's client {hop_workly:,.0f} req/s (the drain {rate / hop_workly:.0%} of it), "
        f"aiohttp {hop_aiohttp:,.0f} req/s ({rate / hop_aiohttp:.0%})"
    )
    if args.json_file:
        with open(args.json_file, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
    if result["arrived"] != result["tasks"] or result["duplicates"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
