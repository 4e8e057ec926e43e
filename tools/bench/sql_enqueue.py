"""Enqueue from SQL, in the application's own transaction: what it costs the application's commits,
how soon the task is delivered, and what the arrivals poll costs an idle server.

    python -m tools.bench.sql_enqueue [--server postgresql://postgres@127.0.0.1:5432]
        [--seconds 5] [--rounds 3] [--rate 50] [--latency-seconds 10] [--idle-seconds 30]
    python -m tools.bench.sql_enqueue --seconds 1 --rounds 1 --latency-seconds 2 --idle-seconds 5  # quick

It creates a scratch database (bench_sqlenq_*, dropped at the end), migrates Workly into schema
``workly`` and creates an application table ``orders``. Closed loop, 8 connections (then 1), each
transaction one of:

- (a) app: one order inserted, no Workly;
- (b) app + enqueue_task: the order and ``workly.enqueue_task(...)`` (a row in sql_arrivals);
- (c) app + enqueue_task + NOTIFY: as (b) plus ``pg_notify(...)``, what a NOTIFY wake-up would cost;
- (d) enqueue_task alone (tasks/s);
- (n) app + NOTIFY, no enqueue_task: the NOTIFY's own cost;

each ``--seconds`` after a 1 s warm-up, ``--rounds`` rounds interleaved, medians reported, with the
CPU per transaction of the connections' PostgreSQL backends (/proc). No Workly runs then: nothing
is delivered (the tasks name https://example.com/hook and are truncated before a server starts).

Then, against a real ``workly serve`` on 127.0.0.1 and a no-op receiver this tool runs (204): the
commit → delivery latency of SQL enqueues at ``--rate``/s from one connection, each in its own
transaction, with WORKLY_SQL_POLL_INTERVAL at 0.005 and at 0 (then only the 1 s idle poll finds
them); of API enqueues for comparison (request start → delivery); and the CPU an idle server and
its PostgreSQL backends use over ``--idle-seconds`` with each poll setting (from /proc, so it must
run on the database's host). Server logs are kept in a temporary directory, printed at the start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import asyncpg
from aiohttp import web

from workly.storage.postgres import PostgresStorage

ORDER = "INSERT INTO orders (customer, total) VALUES ('alice', 12.50)"
ENQUEUE = (
    "SELECT workly.enqueue_task(queue => 'orders', url => 'https://example.com/hook', "
    """body => '{"order": 1}'::jsonb)"""
)
NOTIFY = "SELECT pg_notify('workly_work.workly', 'work')"
VARIANTS = {
    "a": ("(a) app: insert an order", [ORDER]),
    "b": ("(b) app + enqueue_task", [ORDER, ENQUEUE]),
    "c": ("(c) app + enqueue_task + NOTIFY", [ORDER, ENQUEUE, NOTIFY]),
    "d": ("(d) enqueue_task alone (tasks/s)", [ENQUEUE]),
    "n": ("(n) app + NOTIFY, no enqueue_task", [ORDER, NOTIFY]),
}
WARMUP = 1.0
TOKEN = "some-token-0123456789"
SERVER_ENV = {
    "WORKLY_DATABASE_SCHEMA": "workly",
    "WORKLY_SIGNING_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "WORKLY_API_TOKENS": TOKEN,
    "WORKLY_OUTBOUND_ALLOW": "127.0.0.0/8",
}
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


async def commit_rate(
    url: str, statements: list[str], connections: int, seconds: float
) -> tuple[float, float, float]:
    """Transactions per second over ``seconds`` after the warm-up, ``connections`` in a closed loop;
    and, over the whole run, the CPU µs per transaction of their PostgreSQL backends and of this client."""
    conns = [await asyncpg.connect(url) for _ in range(connections)]
    backends = [conn.get_server_pid() for conn in conns]
    pg_before, client_before = sum(cpu_seconds(pid) or 0.0 for pid in backends), time.process_time()
    started = time.perf_counter()
    begin, end = started + WARMUP, started + WARMUP + seconds

    async def loop(conn: asyncpg.Connection) -> tuple[int, int]:
        counted = total = 0
        while time.perf_counter() < end:
            async with conn.transaction():
                for sql in statements:
                    await conn.execute(sql)
            counted += begin <= time.perf_counter() < end
            total += 1
        return counted, total

    try:
        done = await asyncio.gather(*(loop(conn) for conn in conns))
        pg = sum(cpu_seconds(pid) or 0.0 for pid in backends) - pg_before
        client = time.process_time() - client_before
    finally:
        for conn in conns:
            await conn.close()
    total = sum(t for _, t in done)
    return sum(c for c, _ in done) / seconds, pg / total * 1e6, client / total * 1e6


async def reset(admin: asyncpg.Connection) -> None:
    await admin.execute("TRUNCATE workly.tasks, workly.sql_arrivals, orders CASCADE")
    await admin.execute("CHECKPOINT")  # no checkpoint's full-page writes inside a measurement


class Receiver:
    """A no-op endpoint on 127.0.0.1: 204, and the arrival time of each body's ``n``."""

    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        n = json.loads(await request.read())["n"]
        self.arrivals.setdefault(n, time.perf_counter())
        return web.Response(status=204)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/hook"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start_server(db_url: str, poll: str, log: Path) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLY_")}
    env.update(SERVER_ENV, WORKLY_DATABASE_URL=db_url, WORKLY_SQL_POLL_INTERVAL=poll)
    workly = str(Path(sys.executable).with_name("workly"))
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            workly, "serve", "--host", "127.0.0.1", "--port", str(port), env=env, stdout=out, stderr=out
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline and proc.returncode is None:
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"{base}/health/ready") as response:
                    if response.status == 200:
                        return proc, base
            await asyncio.sleep(0.1)
    await stop_server(proc)
    raise SystemExit(f"workly serve did not become ready; its log: {log}")


async def stop_server(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM to this PID (its shutdown grace is 25 s), SIGKILL after 30 s."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout=30)
        except TimeoutError:
            proc.kill()
            await asyncio.wait_for(proc.wait(), timeout=10)


async def paced(rate: float, seconds: float, one: Callable[[str], Awaitable[float]]) -> dict[str, float]:
    """Call ``one(n)`` (which returns the time its latency counts from) at ``rate``/s, one after another."""
    sent: dict[str, float] = {}
    started, total = time.perf_counter(), int(rate * seconds)
    for n in range(total):
        await asyncio.sleep(max(0.0, started + n / rate - time.perf_counter()))
        sent[f"{n}"] = await one(f"{n}")
    return sent


async def latency(receiver: Receiver, sent: dict[str, float], wait: float) -> dict[str, float]:
    deadline = time.perf_counter() + wait
    while len(set(sent) & set(receiver.arrivals)) < len(sent) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    waits = sorted(receiver.arrivals[n] - t for n, t in sent.items() if n in receiver.arrivals)
    receiver.arrivals.clear()
    if not waits:
        return {"lost": len(sent)}
    shares = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
    return {name: pct(waits, share) for name, share in shares.items()} | {"lost": len(sent) - len(waits)}


def pct(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def sql_latency(db_url: str, receiver: Receiver, rate: float, seconds: float) -> dict[str, float]:
    conn = await asyncpg.connect(db_url)

    async def one(n: str) -> float:
        async with conn.transaction():
            await conn.execute(ORDER)
            await conn.execute(
                "SELECT workly.enqueue_task(queue => 'orders', url => $1, body => $2::jsonb)",
                receiver.url,
                json.dumps({"n": n}),
            )
        return time.perf_counter()  # just after COMMIT returned

    try:
        sent = await paced(rate, seconds, one)
    finally:
        await conn.close()
    return await latency(receiver, sent, 5.0)


async def api_latency(base: str, receiver: Receiver, rate: float, seconds: float) -> dict[str, float]:
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession(base_url=base, headers=headers) as http:

        async def one(n: str) -> float:
            began = time.perf_counter()  # just before the request
            task = {"url": receiver.url, "body": {"n": n}}
            async with http.post("/v1/queues/orders/tasks", json=task) as r:
                assert r.status == 201, await r.text()
            return began

        sent = await paced(rate, seconds, one)
    return await latency(receiver, sent, 5.0)


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK  # utime + stime


async def idle_cpu(
    admin: asyncpg.Connection, server_pid: int, db: str, seconds: float
) -> tuple[float, float]:
    """CPU seconds of the server and of its database's other backends over ``seconds``."""
    backends_sql = "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"
    pids = [server_pid] + [row["pid"] for row in await admin.fetch(backends_sql, db)]
    before = {pid: cpu_seconds(pid) for pid in pids}
    await asyncio.sleep(seconds)
    used = {pid: (cpu_seconds(pid) or start) - start for pid, start in before.items() if start is not None}
    return used.pop(server_pid, float("nan")), sum(used.values())


def row(label: str, values: list[str]) -> str:
    return f"{label:<36}" + "".join(f"{v:>20}" for v in values)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


async def main(args: argparse.Namespace) -> None:
    db = f"bench_sqlenq_{uuid.uuid4().hex[:8]}"
    server_url = args.server.rstrip("/")
    db_url = f"{server_url}/{db}"
    root = await asyncpg.connect(f"{server_url}/postgres")
    await root.execute(f'CREATE DATABASE "{db}"')
    logs = Path(tempfile.mkdtemp(prefix=f"{db}-"))
    try:
        storage = await PostgresStorage.open(db_url, schema="workly")
        await storage.migrate()
        await storage.close()
        admin = await asyncpg.connect(db_url)
        await admin.execute("CREATE TABLE orders (id bigserial PRIMARY KEY, customer text, total numeric)")
        print(f"database {db}; server logs in {logs}; {os.cpu_count()} CPUs")
        await throughput(args, db_url, admin)
        await reset(admin)  # no example.com task is left for the server to try
        await serve_side(args, db_url, db, admin, logs)
        await admin.close()
    finally:
        await root.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await root.close()


async def throughput(args: argparse.Namespace, db_url: str, admin: asyncpg.Connection) -> None:
    many = args.connections
    runs = [(many, v) for v in "abcdn"] + [(1, v) for v in "abcn"]
    rates: dict[tuple[int, str], list[float]] = {run: [] for run in runs}
    pg_cpu: dict[tuple[int, str], list[float]] = {run: [] for run in runs}
    for round_ in range(args.rounds):
        for conns, variant in runs:
            await reset(admin)
            rate, pg, client = await commit_rate(db_url, VARIANTS[variant][1], conns, args.seconds)
            rates[conns, variant].append(rate)
            pg_cpu[conns, variant].append(pg)
            print(f"  round {round_ + 1}: {VARIANTS[variant][0]}, {conns} conn: {rate:,.0f}/s; CPU/tx: "
                  f"PostgreSQL {pg:,.0f} µs, this client {client:,.0f} µs", flush=True)  # fmt: skip
    print(f"\ncommits/s, closed loop, median (range) of {args.rounds} x {args.seconds:g} s")
    print(row("", [f"{many} connections", "vs (a)", "PG CPU/tx", "1 connection", "vs (a)", "PG CPU/tx"]))
    base = {c: statistics.median(rates[c, "a"]) for c in (many, 1)}
    for variant, (label, _) in VARIANTS.items():
        cells = []
        for conns in (many, 1):
            if (conns, variant) in rates:
                median = statistics.median(rates[conns, variant])
                cpu = statistics.median(pg_cpu[conns, variant])
                cells += [spread(rates[conns, variant]), f"{median / base[conns]:.0%}", f"{cpu:,.0f} µs"]
            else:
                cells += ["-", "-", "-"]
        print(row(label, cells))
    b, c, n = (statistics.median(rates[many, v]) for v in "bcn")
    print(f"at {many} connections: (c)/(b) {c / b:.0%}, (n)/(a) {n / base[many]:.0%}")


async def serve_side(
    args: argparse.Namespace, db_url: str, db: str, admin: asyncpg.Connection, logs: Path
) -> None:
    receiver = Receiver()
    await receiver.start()
    results: list[tuple[str, dict[str, float]]] = []
    idle: list[tuple[str, float, float]] = []
    try:
        for poll in ("0.005", "0"):
            proc, base = await start_server(db_url, poll, logs / f"serve-poll-{poll}.log")
            try:
                await asyncio.sleep(1.0)
                measured = await sql_latency(db_url, receiver, args.rate, args.latency_seconds)
                results.append((f"SQL enqueue_task, poll {poll} s", measured))
                if poll != "0":
                    measured = await api_latency(base, receiver, args.rate, args.latency_seconds)
                    results.append(("HTTP API (request start)", measured))
                left = await admin.fetchval("SELECT count(*) FROM workly.sql_arrivals")
                print(f"  poll {poll}: {left} sql_arrivals rows left after the run", flush=True)
                await asyncio.sleep(3.0)  # let the last deliveries and their bookkeeping settle
                workly_cpu, pg_cpu = await idle_cpu(admin, proc.pid, db, args.idle_seconds)
                idle.append((poll, workly_cpu, pg_cpu))
            finally:
                await stop_server(proc)
    finally:
        await receiver.stop()
    print(f"\ncommit (API: request start) -> delivery, {args.rate:g}/s for {args.latency_seconds:g} s")
    print(row("", ["p50 ms", "p95 ms", "p99 ms", "lost"]))
    for label, m in results:
        cells = [f"{m[k] * 1000:.1f}" if k in m else "-" for k in ("p50", "p95", "p99")]
        print(row(label, [*cells, f"{m['lost']:.0f}"]))
    print(f"\nidle workly serve, CPU seconds over {args.idle_seconds:g} s")
    print(row("", ["workly process", "its PG backends", "both, % of a core"]))
    for poll, workly_cpu, pg_cpu in idle:
        share = (workly_cpu + pg_cpu) / args.idle_seconds
        print(row(f"WORKLY_SQL_POLL_INTERVAL={poll}", [f"{workly_cpu:.2f}", f"{pg_cpu:.2f}", f"{share:.1%}"]))


if __name__ == "__main__":
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    server = "postgresql://postgres@127.0.0.1:5432"
    parser.add_argument("--server", default=server, help="PostgreSQL server URL, without a database")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds measured per commit-rate run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the commit-rate runs")
    parser.add_argument("--connections", type=int, default=8, help="concurrent application connections")
    parser.add_argument("--rate", type=float, default=50.0, help="enqueues/s for the latency runs")
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="seconds of each latency run")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="seconds of each idle CPU reading")
    asyncio.run(main(parser.parse_args()))
