"""A bulk retry of a large backlog of failed tasks while enqueues go on.

    python -m tools.bench.bulk_retry SERVER_URL TOKEN [tasks] [rate] [--slow-enqueue SECONDS]

Against a running server (workly serve with WORKLY_OUTBOUND_ALLOW opening 127.0.0.1, or
workly dev). A receiver this script runs on 127.0.0.1 first fails ``tasks`` tasks of queue
``bulk`` (max_attempts 1, answered 500), then answers 204. While one enqueue after another
goes to queue ``load`` at ``rate`` per second, it asks for one bulk operation, ``retry`` of
queue ``bulk``'s failed tasks, and waits until every failed task arrived once more.

It prints the operation's duration (created → finished, as the server recorded it), the
time until the last redelivery arrived, and the enqueue latency (p50, p99, max) measured
while the operation ran. It exits 1 if an enqueue took longer than ``--slow-enqueue`` seconds
(1 by default; 0: not checked; the test suite gives 5, a bound for a blocked enqueue), if a task did
not arrive exactly once more, or if a load task was not delivered. Bounded: it gives up after
``tasks`` / 50 + 300 seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from collections import Counter
from datetime import datetime

import aiohttp
from aiohttp import web

BATCH = 1000
SLOW_ENQUEUE = 1.0  # seconds: the bound the operation must not push an enqueue past (by default)


class Receiver:
    def __init__(self) -> None:
        self.failing = True
        self.bulk: Counter[str] = Counter()  # webhook-id → deliveries answered 204
        self.failed: Counter[str] = Counter()  # … answered 500
        self.load: set[str] = set()

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        task_id = request.headers["webhook-id"]
        if request.path == "/load":
            self.load.add(task_id)
            return web.Response(status=204)
        if self.failing:
            self.failed[task_id] += 1
            return web.Response(status=500)
        self.bulk[task_id] += 1
        return web.Response(status=204)


async def fail_backlog(http: aiohttp.ClientSession, url: str, tasks: int, deadline: float) -> None:
    async with http.put("/v1/queues/bulk", json={"max_concurrency": 64}) as response:
        assert response.status in (200, 201), await response.text()
    for start in range(0, tasks, BATCH):
        batch = [
            {"url": url, "max_attempts": 1, "body": {"n": n}} for n in range(start, min(tasks, start + BATCH))
        ]
        async with http.post("/v1/queues/bulk/tasks/batch", json={"tasks": batch}) as response:
            assert response.status == 201, await response.text()
    while time.monotonic() < deadline:
        async with http.get("/v1/queues/bulk") as response:
            if (await response.json())["counts"]["failed"] >= tasks:
                return
        await asyncio.sleep(0.5)
    raise SystemExit("the backlog did not fail in time")


async def steady_load(
    http: aiohttp.ClientSession, url: str, rate: float, stop: asyncio.Event
) -> list[tuple[float, float]]:
    """Enqueue one task after another at ``rate``/s until ``stop``; (start, seconds) each."""
    timings: list[tuple[float, float]] = []
    in_flight: set[asyncio.Task[None]] = set()

    async def one(n: int) -> None:
        began = time.monotonic()
        async with http.post("/v1/queues/load/tasks", json={"url": url, "body": {"n": n}}) as response:
            assert response.status == 201, await response.text()
        timings.append((began, time.monotonic() - began))

    started, n = time.monotonic(), 0
    while not stop.is_set():
        task = asyncio.create_task(one(n))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
        n += 1
        await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
    await asyncio.gather(*in_flight)
    return timings


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def main(server: str, token: str, tasks: int, rate: float, slow_enqueue: float = SLOW_ENQUEUE) -> int:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/{path:.*}", receiver.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    deadline = time.monotonic() + tasks / 50 + 300
    headers = {"authorization": f"Bearer {token}"}
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(base_url=server, headers=headers, timeout=timeout) as http:
        await fail_backlog(http, f"http://127.0.0.1:{port}/bulk", tasks, deadline)
        receiver.failing = False
        stop = asyncio.Event()
        load = asyncio.create_task(steady_load(http, f"http://127.0.0.1:{port}/load", rate, stop))
        await asyncio.sleep(1)  # the load runs alone for a second: its baseline
        asked = time.monotonic()
        body = {"action": "retry", "filter": {"queue": "bulk", "status": "failed"}}
        async with http.post("/v1/operations", json=body) as response:
            assert response.status == 202, await response.text()
            operation = await response.json()
        while operation["state"] == "running" and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            async with http.get(f"/v1/operations/{operation['id']}") as response:
                operation = await response.json()
        finished = time.monotonic()
        while len(receiver.bulk) < tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        drained = time.monotonic()
        stop.set()
        timings = await load
        enqueued = len(timings)
        while len(receiver.load) < enqueued and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    await runner.cleanup()

    windows = {
        "before the operation": [seconds for began, seconds in timings if began < asked],
        "while the operation ran": [seconds for began, seconds in timings if asked <= began <= finished],
        "until every redelivery arrived": [
            seconds for began, seconds in timings if asked <= began <= drained
        ],
    }
    took = datetime.fromisoformat(operation["finished_at"]) - datetime.fromisoformat(operation["created_at"])
    seconds = max(took.total_seconds(), 1e-9)
    print(f"operation {operation['id']} {operation['state']}: {operation['matched']:,} matched, "
          f"{operation['changed']:,} changed, {operation['skipped']:,} skipped")  # fmt: skip
    print(f"  server-side duration {seconds:.2f} s ({operation['changed'] / seconds:,.0f} tasks/s); "
          f"seen done after {finished - asked:.2f} s")  # fmt: skip
    print(f"  every redelivery arrived {drained - asked:.2f} s after the request")
    for label, values in windows.items():
        if values:
            p50, p99 = statistics.median(values) * 1000, percentile(values, 0.99) * 1000
            print(f"  enqueue latency {label} ({len(values)} enqueues at {rate:g}/s): "
                  f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(values) * 1000:.1f} ms")  # fmt: skip
    failures = []
    slow = [s for _, s in timings if slow_enqueue and s > slow_enqueue]
    if slow:
        failures.append(f"{len(slow)} enqueues slower than {slow_enqueue:g} s (max {max(slow):.2f} s)")
    if operation["state"] != "succeeded" or operation["changed"] != tasks:
        failures.append(f"the operation ended {operation['state']} with {operation['changed']} changed")
    once_more = sum(1 for n in receiver.bulk.values() if n == 1)
    if once_more != tasks or len(receiver.bulk) != tasks or set(receiver.bulk) != set(receiver.failed):
        failures.append(
            f"{once_more} of {tasks} tasks arrived exactly once more ({len(receiver.bulk)} distinct)"
        )
    if len(receiver.load) != enqueued:
        failures.append(f"{enqueued - len(receiver.load)} of {enqueued} load tasks were not delivered")
    for failure in failures:
        print(f"FAIL: {failure}")
    if not failures:
        bound = f"no enqueue over {slow_enqueue:g} s" if slow_enqueue else "enqueue latency not checked"
        print(f"OK: {tasks:,} tasks redelivered once each; {enqueued:,} load tasks delivered; {bound}")
    return 1 if failures else 0


def _seconds(text: str) -> float:
    value = float(text)
    if not (value >= 0 and math.isfinite(value)):  # nan and inf would turn the check off silently
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench.bulk_retry", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("server")
    parser.add_argument("token")
    parser.add_argument("tasks", nargs="?", type=int, default=20_000)
    parser.add_argument("rate", nargs="?", type=float, default=200.0)
    parser.add_argument(
        "--slow-enqueue", type=_seconds, default=SLOW_ENQUEUE, help="fail on an enqueue slower (0: no bound)"
    )
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.server, args.token, args.tasks, args.rate, args.slow_enqueue)))
