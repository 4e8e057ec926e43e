"""Many schedules firing at the same minute, on running servers.

    python -m tools.bench.schedules SERVER_URL[,SERVER_URL…] TOKEN [schedules] [firings]

Against one or more running servers on one database (workly serve with WORKLY_OUTBOUND_ALLOW
opening 127.0.0.1, or workly dev). It creates ``schedules`` schedules ``* * * * *`` (round
robin through the servers given, queue ``bench-schedules`` with max_concurrency 64), each
delivering to a receiver this script runs on 127.0.0.1, waits for ``firings`` minute
boundaries, then deletes the schedules.

For each firing it prints how late the tasks were delivered (arrival at the receiver - fire
time) as p50, p99 and max; for the run, how late they were made (the servers' histogram
``workly_schedule_lateness_seconds``: fire time → the firing's commit), as its mean and the
bucket its 99th percentile falls in. It exits 1 if a firing did not deliver every schedule's
task exactly once. Bounded: it gives up ``firings`` + 2 minutes after it starts.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime

import aiohttp
from aiohttp import web

QUEUE = "bench-schedules"
CREATE_BEFORE_SECOND = 30  # creating them must not straddle a minute boundary


class Receiver:
    def __init__(self) -> None:
        self.arrivals: dict[str, list[float]] = defaultdict(list)  # webhook-id → arrival times

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.arrivals[request.headers["webhook-id"]].append(time.time())
        return web.Response(status=204)


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def summary(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"p50 {statistics.median(ms):.0f} ms, p99 {percentile(ms, 0.99):.0f} ms, max {max(ms):.0f} ms"


async def queue_tasks(http: aiohttp.ClientSession) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    cursor = None
    while True:
        params = {"limit": "500", **({"cursor": cursor} if cursor else {})}
        async with http.get(f"/v1/queues/{QUEUE}/tasks", params=params) as response:
            page = await response.json()
        found += page["tasks"]
        cursor = page["next_cursor"]
        if cursor is None:
            return found


async def made_lateness(sessions: list[aiohttp.ClientSession]) -> str:
    """The servers' schedule lateness histograms, summed: the mean and the p99's bucket."""
    buckets: defaultdict[float, float] = defaultdict(float)
    total, count = 0.0, 0.0
    for session in sessions:
        async with session.get("/metrics") as response:
            text = await response.text()
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name.startswith("workly_schedule_lateness_seconds_bucket"):
                buckets[float(name.split('le="')[1].split('"')[0])] += float(value)
            elif name == "workly_schedule_lateness_seconds_sum":
                total += float(value)
            elif name == "workly_schedule_lateness_seconds_count":
                count += float(value)
    if not count:
        return "no firings counted"
    p99 = min(bound for bound, seen in buckets.items() if seen >= 0.99 * count)
    return f"mean {total / count * 1000:.0f} ms, p99 at most {p99 * 1000:.0f} ms ({count:.0f} firings)"


async def main(servers: list[str], token: str, count: int, firings: int) -> int:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/{path:.*}", receiver.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/tick"
    deadline = time.monotonic() + (firings + 2) * 60
    headers = {"authorization": f"Bearer {token}"}
    timeout = aiohttp.ClientTimeout(total=60)
    sessions = [aiohttp.ClientSession(base_url=s, headers=headers, timeout=timeout) for s in servers]
    http = sessions[0]
    created: list[str] = []
    lateness = "not read"
    try:
        async with http.put(f"/v1/queues/{QUEUE}", json={"max_concurrency": 64}) as response:
            assert response.status in (200, 201), await response.text()
        while datetime.now(UTC).second > CREATE_BEFORE_SECOND:  # all made before the same minute
            await asyncio.sleep(0.5)
        for session, _ in zip(itertools.cycle(sessions), range(count), strict=False):
            body = {"cron": "* * * * *", "queue": QUEUE, "task": {"url": url}}
            async with session.post("/v1/schedules", json=body) as response:
                assert response.status == 201, await response.text()
                created.append((await response.json())["id"])
        print(f"{count} schedules created through {len(servers)} server(s); waiting for {firings} firings")
        while time.monotonic() < deadline:
            tasks = await queue_tasks(http)
            done = Counter(str(t["run_at"]) for t in tasks if t["status"] == "succeeded")
            first = sorted(done)[:firings]
            if len(first) == firings and all(done[fire_time] >= count for fire_time in first):
                break
            await asyncio.sleep(0.5)
        lateness = await made_lateness(sessions)
    finally:
        for schedule_id in created:
            async with http.delete(f"/v1/schedules/{schedule_id}") as response:
                assert response.status == 204, await response.text()
        for session in sessions:
            await session.close()
        await runner.cleanup()

    failures = []
    by_fire_time: dict[str, list[dict[str, object]]] = defaultdict(list)
    for task in tasks:
        by_fire_time[str(task["run_at"])].append(task)
    for fire_text in sorted(by_fire_time)[:firings]:
        made = by_fire_time[fire_text]
        fire_at = parse(fire_text).timestamp()
        arrivals = [receiver.arrivals.get(str(t["id"]), []) for t in made]
        delivered_late = [times[0] - fire_at for times in arrivals if times]
        print(f"firing {fire_text}: {len(made)} tasks")
        if delivered_late:
            print(f"  delivered after the fire time: {summary(delivered_late)}")
        twice = sum(1 for times in arrivals if len(times) > 1)
        if len(made) != count or len(delivered_late) != count or twice:
            failures.append(f"{fire_text}: {len(made)} tasks, {len(delivered_late)} delivered, {twice} twice")
    print(f"made after the fire time (all firings): {lateness}")
    if len(by_fire_time) < firings:
        failures.append(f"only {len(by_fire_time)} of {firings} firings seen before the deadline")
    for failure in failures:
        print(f"FAIL: {failure}")
    if not failures:
        print(f"OK: {firings} firings of {count} schedules, each task made and delivered once")
    print(f"(measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC)")
    return 1 if failures else 0


if __name__ == "__main__":
    argv = sys.argv[1:]
    if len(argv) < 2:
        raise SystemExit(__doc__)
    schedules = int(argv[2]) if len(argv) > 2 else 1000
    rounds = int(argv[3]) if len(argv) > 3 else 2
    raise SystemExit(asyncio.run(main(argv[0].split(","), argv[1], schedules, rounds)))
