"""``python -m tools.loadtest -rate 1000 -duration 20s`` (``just loadtest …``).

Open loop: task n is sent at start + n/rate whatever happened to earlier ones, at most
``-concurrency`` requests in flight. Latency runs from just before the enqueue request
to the moment the sink receives the delivery. A warm-up at the same rate comes first;
only the steady-state tasks count in the table, but every task must arrive: any loss
makes the exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path

import aiohttp

from tools.loadtest.sink import Sink
from tools.loadtest.stats import Report, percentile

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)?$")


def duration(text: str) -> float:
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 20s, 500ms, 1m)")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="loadtest", description=__doc__.split("\n\n")[0])
    parser.add_argument("-rate", type=float, default=1000, help="tasks per second (default 1000)")
    parser.add_argument("-duration", type=duration, default=20.0, help="steady state (default 20s)")
    parser.add_argument("-warmup", type=duration, default=5.0, help="warm-up at the same rate (default 5s)")
    parser.add_argument("-concurrency", type=int, default=64, help="enqueue requests in flight (default 64)")
    parser.add_argument("-url", default="http://127.0.0.1:7337", help="the Workly server")
    parser.add_argument("-token", default=None, help="API bearer token, if the server wants one")
    parser.add_argument("-queue", default="loadtest", help="queue to recreate and use (default loadtest)")
    parser.add_argument("-drain", type=duration, default=60.0, help="how long to wait for stragglers")
    parser.add_argument("-ceiling", type=duration, default=0.0, help="also measure a bare aiohttp client")
    parser.add_argument("-json", dest="json_file", default=None, help="write the results as JSON here")
    parser.add_argument("-quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.concurrency < 1:
        parser.error("-rate must be > 0 and -concurrency >= 1")
    return args


class Run:
    def __init__(self, args: argparse.Namespace, sink: Sink, session: aiohttp.ClientSession) -> None:
        self.args = args
        self.sink = sink
        self.session = session
        self.sent_at: dict[int, float] = {}  # task number → just before its enqueue request
        self.enqueue_latency: dict[int, float] = {}
        self.ok: set[int] = set()
        self.errors = 0
        self.first_error = ""
        self.in_flight = asyncio.Semaphore(args.concurrency)
        self.pending: set[asyncio.Task[None]] = set()
        base = args.url.rstrip("/")
        self.enqueue_url = f"{base}/v1/queues/{args.queue}/tasks"

    async def enqueue(self, number: int) -> None:
        body = json.dumps({"url": f"{self.sink.url}/d/{number}", "body": {"n": number}}).encode()
        started = time.perf_counter()
        self.sent_at[number] = started
        try:
            async with self.session.post(self.enqueue_url, data=body) as response:
                await response.read()
                if response.status == 201:
                    self.ok.add(number)
                else:
                    self._error(f"HTTP {response.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._error(f"{type(exc).__name__}: {exc}")
        finally:
            self.enqueue_latency[number] = time.perf_counter() - started
            self.in_flight.release()

    def _error(self, text: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or text

    async def send(self, first: int, seconds: float) -> tuple[int, float, float]:
        """Send tasks first, first+1, … at the rate for ``seconds``; return (next, start, end)."""
        interval = 1.0 / self.args.rate
        start = time.perf_counter()
        count = int(seconds * self.args.rate)
        for offset in range(count):
            due = start + offset * interval
            wait = due - time.perf_counter()
            if wait > 0.0005:
                await asyncio.sleep(wait)
            await self.in_flight.acquire()
            task = asyncio.create_task(self.enqueue(first + offset))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)
        return first + count, start, time.perf_counter()

    async def progress(self, began: float) -> None:
        while True:
            await asyncio.sleep(1)
            sent, delivered = len(self.ok), len(self.sink.arrivals)
            print(
                f"{time.perf_counter() - began:6.1f}s  sent={sent:,}  delivered={delivered:,}  "
                f"backlog={sent - delivered:,}  errors={self.errors:,}",
                file=sys.stderr,
                flush=True,
            )

    async def drain(self) -> None:
        deadline = time.perf_counter() + self.args.drain
        while self.pending and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        while time.perf_counter() < deadline and not self.ok <= self.sink.arrivals.keys():
            await asyncio.sleep(0.05)


async def prepare_queue(session: aiohttp.ClientSession, base: str, queue: str) -> None:
    """Recreate the queue with max_concurrency raised: only the global in-flight limit applies."""
    async with session.delete(f"{base}/v1/queues/{queue}") as response:
        if response.status not in (204, 404):
            raise SystemExit(f"loadtest: could not delete queue {queue}: HTTP {response.status}")
    async with session.put(f"{base}/v1/queues/{queue}", json={"max_concurrency": 10_000}) as response:
        if response.status not in (200, 201):
            raise SystemExit(f"loadtest: could not create queue {queue}: HTTP {response.status}")


async def measure_ceiling(sink: Sink, seconds: float, concurrency: int) -> float:
    """Requests/s of a plain aiohttp client posting to the same sink (closed loop)."""
    done = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                async with session.post(sink.url + "/ceiling", data=b'{"n":0}') as response:
                    await response.read()
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.perf_counter() - started)


def report(run: Run, steady: range, window: tuple[float, float], ceiling: float | None) -> Report:
    arrivals = run.sink.arrivals
    measured_ok = [n for n in steady if n in run.ok]
    delivered = [n for n in measured_ok if n in arrivals]
    latencies = [arrivals[n] - run.sent_at[n] for n in delivered]
    enqueue = [run.enqueue_latency[n] for n in steady if n in run.enqueue_latency]
    start, end = window
    in_window = sum(1 for t in arrivals.values() if start <= t <= end)
    per_second = in_window / (end - start)
    # The window is as long as sending took: longer than -duration when the sender (64
    # requests in flight, sharing the CPU) could not keep the rate.
    sent_per_second = len(measured_ok) / (end - start)
    # Behind: over the steady window the server delivered clearly less than it was sent.
    backlog_grew = per_second < 0.97 * sent_per_second
    return Report(
        rate=run.args.rate,
        duration=end - start,
        sent=len(run.ok),
        enqueue_errors=run.errors,
        delivered=len(arrivals.keys() & run.ok),
        lost=len(run.ok - arrivals.keys()),
        duplicates=run.sink.duplicates,
        enqueue_p50=percentile(enqueue, 0.50),
        enqueue_p99=percentile(enqueue, 0.99),
        delivery_p50=percentile(latencies, 0.50),
        delivery_p95=percentile(latencies, 0.95),
        delivery_p99=percentile(latencies, 0.99),
        delivered_per_second=per_second,
        sent_per_second=sent_per_second,
        backlog_grew=backlog_grew,
        ceiling_per_second=ceiling,
    )


async def main(args: argparse.Namespace) -> tuple[Report, int]:
    sink = Sink()
    await sink.start()
    headers = {"content-type": "application/json"}
    if args.token:
        headers["authorization"] = f"Bearer {args.token}"
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    timeout = aiohttp.ClientTimeout(total=30)
    try:
        async with aiohttp.ClientSession(connector=connector, headers=headers, timeout=timeout) as session:
            await prepare_queue(session, args.url.rstrip("/"), args.queue)
            ceiling = await measure_ceiling(sink, args.ceiling, args.concurrency) if args.ceiling else None
            run = Run(args, sink, session)
            began = time.perf_counter()
            ticker = None if args.quiet else asyncio.create_task(run.progress(began))
            next_number, _, _ = await run.send(0, args.warmup)
            first_steady = next_number
            next_number, start, end = await run.send(first_steady, args.duration)
            await run.drain()
            if ticker is not None:
                ticker.cancel()
            result = report(run, range(first_steady, next_number), (start, end), ceiling)
    finally:
        await sink.stop()
    print(result.table())
    print(
        f"\nsent {result.sent:,} tasks ({run.errors:,} enqueue errors"
        f"{': ' + run.first_error if run.first_error else ''}), delivered {result.delivered:,}, "
        f"lost {result.lost:,}, duplicated {result.duplicates:,}"
    )
    return result, 1 if result.lost or run.errors else 0


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    final, status = asyncio.run(main(arguments))
    if arguments.json_file:
        Path(arguments.json_file).write_text(json.dumps(final.as_json(), indent=2) + "\n")
    sys.exit(status)
