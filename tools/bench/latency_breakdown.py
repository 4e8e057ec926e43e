"""Where a task's time goes between its enqueue request and its delivery, as percentiles.

    python -m tools.bench.latency_breakdown http://127.0.0.1:7337 [-token T] [-rate 1000] [-duration 10]

Sends tasks at a steady rate (open loop, 64 requests in flight, Workly's own HTTP client) to
a no-op sink on 127.0.0.1, then reads back, for a sample of them, the times the server
stamped: the task's ``created_at`` (when the group commit holding it began) and its first
attempt's ``started_at`` (when the deliverer began, before signing). With the client's own
clock around them (one machine, one wall clock), each task splits into:

- request: the enqueue's bytes sent, parsed, validated, and waiting for a group commit;
- commit + answer: the commit, then the 201 back to the client (``created_at`` → answer);
- commit + wake + claim: the commit, the dispatcher's wake, its claim, the task's start;
- sign + send: signing, the connection and the request, up to the sink's having read it
  whole (the sink shares this process's event loop with the sender: its lag lands here).

A task's clock starts when it is due (open loop: start + n/rate), so time spent waiting for
one of the 64 request slots counts in "request"; the rate actually sent is printed.

Bounded: ``rate * duration`` tasks, stragglers waited for 30 s at most; the queue it makes
(``latency-breakdown``) is deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import datetime

from tools.bench.scratch_queue import BenchApi, BenchError, cancel_all, scratch_queue
from workly.loadtest.sink import Sink
from workly.loadtest.stats import percentile

QUEUE = "latency-breakdown"
_IN_FLIGHT = 64
_STAGES = ("request", "commit + answer", "commit + wake + claim", "sign + send", "total")


class _Run:
    def __init__(self, api: BenchApi, sink: Sink) -> None:
        self.api, self.sink = api, sink
        self.sent: dict[int, float] = {}  # task number → wall clock before its request
        self.answered: dict[int, float] = {}
        self.ids: dict[int, str] = {}
        self.created: dict[int, float] = {}
        self.refused = 0  # enqueues not answered 201

    async def enqueue(self, number: int, due: float, limit: asyncio.Semaphore) -> None:
        self.sent[number] = due
        async with limit:
            body = json.dumps({"url": f"{self.sink.url}/d/{number}", "body": {"n": number}}).encode()
            status, answer = await self.api.call("POST", f"/v1/queues/{QUEUE}/tasks", body)
            self.answered[number] = time.time()
        if status == 201:
            task = json.loads(answer)
            self.ids[number] = task["id"]
            self.created[number] = _wall(task["created_at"])
        else:
            self.refused += 1

    async def started_at(self, number: int, limit: asyncio.Semaphore) -> float | None:
        """The first attempt's start, once the attempt is recorded (after the delivery)."""
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            async with limit:
                status, answer = await self.api.call("GET", f"/v1/tasks/{self.ids[number]}/attempts")
            attempts = json.loads(answer)["attempts"] if status == 200 else []
            if attempts:
                return _wall(attempts[0]["started_at"])
            await asyncio.sleep(0.1)
        return None


def _wall(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def breakdown(
    server: str, token: str | None, rate: float, duration: float, sample: int
) -> dict[str, list[float]]:
    sink = Sink()
    await sink.start()
    # An answer is one task (under 1 KB) or its attempts: 64 KB is more than enough.
    run = _Run(BenchApi(server, token, connections=_IN_FLIGHT, max_body=65536), sink)
    pending: list[asyncio.Task[None]] = []
    try:
        async with scratch_queue(run.api, QUEUE, {"max_concurrency": 10000}):
            try:
                # The sink stamps arrivals with perf_counter; this turns them into wall-clock times.
                offset = time.time() - time.perf_counter()
                limit, total = asyncio.Semaphore(_IN_FLIGHT), int(rate * duration)
                start = time.perf_counter()
                for number in range(total):
                    due = start + number / rate
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                    pending.append(asyncio.create_task(run.enqueue(number, due + offset, limit)))
                await asyncio.gather(*pending)
                sent_per_second = total / (time.perf_counter() - start)
            finally:
                await cancel_all(pending)
            deadline = time.perf_counter() + 30
            while not run.ids.keys() <= sink.arrivals.keys() and time.perf_counter() < deadline:
                await asyncio.sleep(0.05)
            chosen = sorted(run.ids)[:: max(1, -(-len(run.ids) // sample))]
            reads = asyncio.Semaphore(16)
            started = await asyncio.gather(*(run.started_at(n, reads) for n in chosen))
    finally:
        await run.api.close()
        await sink.stop()
    print(
        f"sent {sent_per_second:,.0f}/s; {run.refused} enqueues refused; "
        f"{len(run.ids) - len(run.ids.keys() & sink.arrivals.keys())} tasks not delivered"
    )
    stages: dict[str, list[float]] = {stage: [] for stage in _STAGES}
    for number, began in zip(chosen, started, strict=True):
        if began is None or number not in sink.arrivals:
            continue
        arrived = sink.arrivals[number] + offset
        sent, created = run.sent[number], run.created[number]
        for stage, seconds in zip(
            _STAGES,
            (
                created - sent,
                run.answered[number] - created,
                began - created,
                arrived - began,
                arrived - sent,
            ),
            strict=True,
        ):
            stages[stage].append(seconds)
    return stages


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("server")
    parser.add_argument("-token", default=None)
    parser.add_argument("-rate", type=float, default=1000.0)
    parser.add_argument("-duration", type=float, default=10.0)
    parser.add_argument("-sample", type=int, default=1000, help="tasks whose attempts are read")
    parser.add_argument("-json", dest="json_file", default=None)
    args = parser.parse_args()
    try:
        stages = asyncio.run(
            breakdown(args.server.rstrip("/"), args.token, args.rate, args.duration, args.sample)
        )
    except BenchError as exc:
        sys.exit(str(exc))
    print(f"{len(stages['total'])} tasks at {args.rate:g}/s, milliseconds")
    print(f"{'stage':24} {'p50':>7} {'p90':>7} {'p99':>7}")
    table = {}
    for stage, values in stages.items():
        if not values:
            sys.exit("no task was delivered and read back")
        row = {
            name: (percentile(values, q) or 0.0) * 1000
            for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
        }
        table[stage] = row
        print(f"{stage:24} {row['p50']:7.2f} {row['p90']:7.2f} {row['p99']:7.2f}")
    if args.json_file:
        with open(args.json_file, "w", encoding="utf-8") as out:
            json.dump(table, out, indent=2)


if __name__ == "__main__":
    main()
