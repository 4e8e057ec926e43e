"""The load test: open loop through the API to a no-op sink the test runs itself.

Task n is sent at start + n/rate whatever happened to earlier ones, with at most
``concurrency`` requests in flight. Latency runs from just before the enqueue request to
the moment the sink receives the delivery. A warm-up at the same rate comes first; only the
steady-state tasks count in the table, but every task must arrive: any loss makes the exit
status 1. The queue is made afresh with its concurrency raised (only the server's in-flight
limit applies) and deleted at the end, with its tasks, unless ``keep``.

Requests go through Workly's own HTTP client (workly/dispatch/http), so the load test needs
nothing the server does not already install.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import sys
import time
from dataclasses import dataclass, field

from workly.dispatch.http import HttpClient, HttpError
from workly.loadtest.sink import Sink
from workly.loadtest.stats import Report, percentile
from workly.ssrf_guard import OutboundPolicy

# The server and the sink may be anywhere the user points them: no address is refused.
ANYWHERE = OutboundPolicy((ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")))
_TIMEOUT = 30.0


@dataclass(frozen=True)
class LoadTest:
    server: str = "http://127.0.0.1:7337"
    token: str | None = None
    rate: float = 1000.0
    duration: float = 20.0
    warmup: float = 5.0
    concurrency: int = 64
    queue: str = "loadtest"
    drain: float = 60.0  # how long to wait for stragglers
    ceiling: float = 0.0  # seconds to measure a bare client against the sink first (0: not)
    quiet: bool = False
    keep: bool = False  # leave the queue and its tasks in the server


class LoadTestError(Exception):
    """The server refused what the load test needs (its queue), or could not be reached."""


class LoadTestInterrupted(LoadTestError):
    """Ctrl-C: the message says what became of the queue."""


@dataclass
class _Run:
    test: LoadTest
    sink: Sink
    client: HttpClient
    headers: dict[str, str]
    sent_at: dict[int, float] = field(default_factory=dict)  # task number → just before its request
    enqueue_latency: dict[int, float] = field(default_factory=dict)
    ok: set[int] = field(default_factory=set)
    errors: int = 0
    first_error: str = ""
    pending: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.in_flight = asyncio.Semaphore(self.test.concurrency)
        self.enqueue_url = f"{self.test.server}/v1/queues/{self.test.queue}/tasks"

    async def enqueue(self, number: int) -> None:
        body = json.dumps({"url": f"{self.sink.url}/d/{number}", "body": {"n": number}}).encode()
        started = time.perf_counter()
        self.sent_at[number] = started
        try:
            response = await self.client.request(
                "POST", self.enqueue_url, self.headers, body, timeout=_TIMEOUT
            )
            if response.status == 201:
                self.ok.add(number)
            else:
                self._error(f"HTTP {response.status}: {response.body[:200].decode(errors='replace')}")
        except (HttpError, TimeoutError) as exc:
            self._error(f"{type(exc).__name__}: {exc}")
        finally:
            self.enqueue_latency[number] = time.perf_counter() - started
            self.in_flight.release()

    def _error(self, text: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or text

    async def send(self, first: int, seconds: float) -> tuple[int, float, float]:
        """Send tasks first, first+1, … at the rate for ``seconds``; return (next, start, end)."""
        interval = 1.0 / self.test.rate
        start = time.perf_counter()
        count = int(seconds * self.test.rate)
        for offset in range(count):
            wait = start + offset * interval - time.perf_counter()
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
        deadline = time.perf_counter() + self.test.drain
        while self.pending and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        while time.perf_counter() < deadline and not self.ok <= self.sink.arrivals.keys():
            await asyncio.sleep(0.05)


async def _call(client: HttpClient, method: str, url: str, headers: dict[str, str], body: bytes = b"") -> int:
    try:
        response = await client.request(method, url, headers, body, timeout=_TIMEOUT)
    except (HttpError, TimeoutError) as exc:
        raise LoadTestError(f"cannot reach {url}: {exc}") from None
    if response.status in (401, 403):
        raise LoadTestError(
            f"{method} {url} answered {response.status}: give the token (--token or WORKLY_TOKEN)"
        )
    return response.status


async def _clean_up(
    client: HttpClient,
    test: LoadTest,
    headers: dict[str, str],
    run: _Run | None,
    ticker: asyncio.Task[None] | None,
) -> str:
    """Stop sending, then delete the queue (again, if an enqueue still in the server made it
    anew after the first delete: enqueues create missing queues). What became of it."""
    stopping = [*(run.pending if run else ()), *([ticker] if ticker else [])]
    for task in stopping:
        task.cancel()
    await asyncio.gather(*stopping, return_exceptions=True)
    try:
        async with asyncio.timeout(5):
            for _ in range(3):
                await _delete_queue(client, test, headers)
                await asyncio.sleep(0.2)  # what the server had received commits in milliseconds
                if await _call(client, "GET", f"{test.server}/v1/queues/{test.queue}", headers) == 404:
                    return "deleted"
    except (LoadTestError, TimeoutError):
        pass
    return f"not deleted (workly queue-delete {test.queue} --yes)"


async def _make_queue(client: HttpClient, test: LoadTest, headers: dict[str, str]) -> None:
    """A queue of its own, with max_concurrency raised: only the global in-flight limit
    applies. Never one that exists: deleting it afterwards would delete someone's tasks."""
    url = f"{test.server}/v1/queues/{test.queue}"
    found = await _call(client, "GET", url, headers)
    if found == 200:
        raise LoadTestError(
            f"queue {test.queue} exists, and the load test deletes its queue afterwards: pick another "
            f"--queue, or delete that one first (workly queue-delete {test.queue} --yes)"
        )
    made = await _call(client, "PUT", url, headers, b'{"max_concurrency": 10000}')
    if made != 201:
        raise LoadTestError(f"could not create queue {test.queue}: HTTP {made}")


async def _delete_queue(client: HttpClient, test: LoadTest, headers: dict[str, str]) -> None:
    await _call(client, "DELETE", f"{test.server}/v1/queues/{test.queue}", headers)


async def measure_ceiling(sink: Sink, seconds: float, concurrency: int) -> float:
    """Requests/s of a plain client posting to the same sink (closed loop)."""
    done = 0
    client = HttpClient(policy=ANYWHERE, max_idle_per_origin=concurrency, max_idle=concurrency)
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await client.request("POST", sink.url + "/ceiling", {}, b'{"n":0}', timeout=_TIMEOUT)
            done += 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        await client.close()
    return done / (time.perf_counter() - started)


def _report(run: _Run, steady: range, window: tuple[float, float], ceiling: float | None) -> Report:
    arrivals = run.sink.arrivals
    measured_ok = [n for n in steady if n in run.ok]
    delivered = [n for n in measured_ok if n in arrivals]
    latencies = [arrivals[n] - run.sent_at[n] for n in delivered]
    enqueue = [run.enqueue_latency[n] for n in steady if n in run.enqueue_latency]
    start, end = window
    per_second = sum(1 for t in arrivals.values() if start <= t <= end) / (end - start)
    # The window is as long as sending took: longer than the duration when the sender (the
    # requests in flight, sharing the CPU) could not keep the rate.
    sent_per_second = len(measured_ok) / (end - start)
    return Report(
        rate=run.test.rate, duration=end - start, sent=len(run.ok), enqueue_errors=run.errors,
        delivered=len(arrivals.keys() & run.ok), lost=len(run.ok - arrivals.keys()),
        duplicates=run.sink.duplicates, enqueue_p50=percentile(enqueue, 0.50),
        enqueue_p99=percentile(enqueue, 0.99), delivery_p50=percentile(latencies, 0.50),
        delivery_p95=percentile(latencies, 0.95), delivery_p99=percentile(latencies, 0.99),
        delivered_per_second=per_second, sent_per_second=sent_per_second,
        # Behind: over the steady window the server delivered clearly less than it was sent.
        backlog_grew=per_second < 0.97 * sent_per_second, ceiling_per_second=ceiling,
    )  # fmt: skip


async def run_load_test(test: LoadTest) -> tuple[Report, str]:
    """The report, and a line of what was sent, delivered, lost. Raises LoadTestError."""
    sink = Sink()
    await sink.start()
    headers = {"content-type": "application/json"}
    if test.token:
        headers["authorization"] = f"Bearer {test.token}"
    client = HttpClient(policy=ANYWHERE, max_idle_per_origin=test.concurrency, max_idle=test.concurrency + 8)
    made, run, ticker = False, None, None
    try:
        await _make_queue(client, test, headers)
        made = True
        ceiling = await measure_ceiling(sink, test.ceiling, test.concurrency) if test.ceiling else None
        run = _Run(test, sink, client, headers)
        began = time.perf_counter()
        ticker = None if test.quiet else asyncio.create_task(run.progress(began))
        first_steady, _, _ = await run.send(0, test.warmup)
        next_number, start, end = await run.send(first_steady, test.duration)
        await run.drain()
        if ticker is not None:
            ticker.cancel()
        result = _report(run, range(first_steady, next_number), (start, end), ceiling)
        clean = not (result.lost or run.errors)
        if clean and not test.keep:
            await _delete_queue(client, test, headers)
    except asyncio.CancelledError:  # Ctrl-C
        if not made:
            raise
        outcome = "kept" if test.keep else await _clean_up(client, test, headers, run, ticker)
        raise LoadTestInterrupted(f"interrupted: queue {test.queue} {outcome}") from None
    except BaseException:  # failed: its tasks would wait for a sink that is gone
        if made and not test.keep:
            await _clean_up(client, test, headers, run, ticker)
        raise
    finally:
        await client.close()
        await sink.stop()
    summary = (
        f"sent {result.sent:,} tasks ({run.errors:,} enqueue errors"
        f"{': ' + run.first_error if run.first_error else ''}), delivered {result.delivered:,}, "
        f"lost {result.lost:,}, duplicated {result.duplicates:,}"
    )
    if test.keep or not clean:  # a run that lost something leaves its tasks to look at
        summary += f"; queue {test.queue} kept (workly tasks --queue {test.queue})"
    return result, summary
