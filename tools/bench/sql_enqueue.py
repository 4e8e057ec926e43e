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
- (r) app + a sql_arrivals row, no enqueue_task: the shipped wake-up's own cost;

each ``--seconds`` after a 1 s warm-up, ``--rounds`` rounds interleaved, medians reported, with the
CPU per transaction of the connections' PostgreSQL backends (/proc), the share of them seen waiting
for a lock (pg_stat_activity, every 10 ms) and the transactions per WAL flush (pg_stat_wal, the
whole server's: run it on an otherwise idle one). No Workly runs then:
nothing is delivered (the tasks name https://example.com/hook and are truncated before a server
starts).

Then, against a real ``workly serve`` on 127.0.0.1 and a no-op receiver this tool runs (204): the
commit → delivery latency of SQL enqueues at ``--rate``/s from one connection, each in its own
transaction, with WORKLY_SQL_POLL_INTERVAL at 0.005 and at 0 (then they are looked for at the
idle poll's pace, WORKLY_POLL_INTERVAL, 1 s); of API enqueues for comparison (request start →
delivery); and the CPU an idle server and its PostgreSQL backends use over ``--idle-seconds``
with each poll setting (from /proc, so it must run on the database's host). Server logs are kept
in a temporary directory, printed at the start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

import aiohttp
import asyncpg
from aiohttp import web

from tools.ports import free_port
from workly.storage.postgres import PostgresStorage

ORDER = "INSERT INTO orders (customer, total) VALUES ('alice', 12.50)"
ENQUEUE = (
    "SELECT workly.enqueue_task(queue => 'orders', url => 'https://example.com/hook', "
    """body => '{"order": 1}'::jsonb)"""
)
NOTIFY = "SELECT pg_notify('workly_work.workly', 'work')"
ARRIVAL = "INSERT INTO workly.sql_arrivals DEFAULT VALUES"  # what enqueue_task adds to wake Workly
VARIANTS = {
    "a": ("(a) app: insert an order", [ORDER]),
    "b": ("(b) app + enqueue_task", [ORDER, ENQUEUE]),
    "c": ("(c) app + enqueue_task + NOTIFY", [ORDER, ENQUEUE, NOTIFY]),
    "d": ("(d) enqueue_task alone (tasks/s)", [ENQUEUE]),
    "n": ("(n) app + NOTIFY, no enqueue_task", [ORDER, NOTIFY]),
    "r": ("(r) app + a sql_arrivals row only", [ORDER, ARRIVAL]),
}
WARMUP = 1.0
TOKEN = "sql-enqueue-token-0123456789abcdef"
SERVER_ENV = {
    "WORKLY_DATABASE_SCHEMA": "workly",
    "WORKLY_SIGNING_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "WORKLY_API_TOKENS": TOKEN,
    "WORKLY_OUTBOUND_ALLOW": "127.0.0.0/8",
}
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
WAL_SYNCS = "SELECT wal_sync FROM pg_stat_wal"
LOCK_WAITS = (
    "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), count(*) FROM pg_stat_activity "
    "WHERE pid = ANY($1::int[])"
)


class Run(NamedTuple):
    rate: float  # transactions/s after the warm-up
    pg_us: float  # CPU µs per transaction of the connections' PostgreSQL backends
    client_us: float  # … of this client
    per_sync: float  # transactions per WAL flush (pg_stat_wal, the whole server): group commit
    lock_wait: float  # share of the backends seen waiting for a heavyweight lock (every 10 ms)


async def commit_rate(
    url: str, admin: asyncpg.Connection, statements: list[str], connections: int, seconds: float
) -> Run:
    """``connections`` run transactions in a closed loop; the rate is over ``seconds`` after the
    warm-up, the CPU and WAL flushes per transaction over the whole run; ``admin`` samples waits."""
    conns = [await asyncpg.connect(url) for _ in range(connections)]
    backends = [conn.get_server_pid() for conn in conns]
    syncs = await conns[0].fetchval(WAL_SYNCS)
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

    waits: list[tuple[int, int]] = []

    async def watch() -> None:
        while time.perf_counter() < end:
            found = await admin.fetchrow(LOCK_WAITS, backends)
            waits.append((found[0], found[1]) if found else (0, 0))
            await asyncio.sleep(0.01)

    try:
        watcher = asyncio.create_task(watch())
        done = await asyncio.gather(*(loop(conn) for conn in conns))
        await watcher
        pg = sum(cpu_seconds(pid) or 0.0 for pid in backends) - pg_before
        client = time.process_time() - client_before
        syncs = await conns[0].fetchval(WAL_SYNCS) - syncs
    finally:
        for conn in conns:
            await conn.close()
    total = sum(t for _, t in done)
    rate = sum(c for c, _ in done) / seconds
    lock_wait = sum(w for w, _ in waits) / max(1, sum(n for _, n in waits))
    return Run(rate, pg / total * 1e6, client / total * 1e6, total / max(syncs, 1), lock_wait)


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


async def start_server(
    db_url: str, poll: str, log: Path, schema: str = "workly"
) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLY_")}
    env.update(SERVER_ENV, WORKLY_DATABASE_URL=db_url, WORKLY_SQL_POLL_INTERVAL=poll)
    env["WORKLY_DATABASE_SCHEMA"] = schema
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
    found = {name: waits[min(len(waits) - 1, int(share * len(waits)))] for name, share in shares.items()}
    return found | {"lost": len(sent) - len(waits)}


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


async def idle_cpu(admin: asyncpg.Connection, pid: int, db: str, seconds: float) -> tuple[float, float]:
    """CPU seconds of the server and of its database's other backends over ``seconds``."""
    backends_sql = "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"
    pids = [pid] + [row["pid"] for row in await admin.fetch(backends_sql, db)]
    before = {p: cpu_seconds(p) for p in pids}
    await asyncio.sleep(seconds)
    used = {p: (cpu_seconds(p) or start) - start for p, start in before.items() if start is not None}
    return used.pop(pid, float("nan")), sum(used.values())


def row(label: str, values: list[str]) -> str:
    return f"{label:<34}" + "".join(f" {v:>19}" for v in values)


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
        await storage.database.migrate()
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
    plan = [(many, v) for v in "abcdnr"] + [(1, v) for v in "abcnr"]
    done: dict[tuple[int, str], list[Run]] = {run: [] for run in plan}
    for round_ in range(args.rounds):
        for conns, variant in plan:
            await reset(admin)
            run = await commit_rate(db_url, admin, VARIANTS[variant][1], conns, args.seconds)
            done[conns, variant].append(run)
            print(f"  round {round_ + 1}: {VARIANTS[variant][0]}, {conns} conn: {run.rate:,.0f}/s; CPU/tx: "
                  f"PostgreSQL {run.pg_us:,.0f} µs, this client {run.client_us:,.0f} µs; "
                  f"{run.per_sync:.2f} tx per WAL flush; {run.lock_wait:.0%} waiting for a lock",
                  flush=True)  # fmt: skip

    def paired(conns: int, variant: str, versus: str = "a") -> str:
        """The median over the rounds of this variant's rate / the other's in the same round."""
        pairs = zip(done[conns, variant], done[conns, versus], strict=True)
        ratios = [100 * x.rate / y.rate for x, y in pairs]
        return f"{statistics.median(ratios):.0f}% ({min(ratios):.0f}-{max(ratios):.0f})"

    def median(runs: list[Run], field: str) -> float:
        return float(statistics.median(getattr(r, field) for r in runs))

    print(f"\ntransactions/s, closed loop, median (range) of {args.rounds} rounds x {args.seconds:g} s; "
          "'vs (a)': median (range) of the rounds' ratios")  # fmt: skip
    print(row("", [f"{many} connections", "vs (a)", "1 connection", "vs (a)"]))
    for variant, (label, _) in VARIANTS.items():
        ones = done.get((1, variant))
        cells = [spread([r.rate for r in done[many, variant]]), paired(many, variant)]
        print(row(label, cells + ([spread([r.rate for r in ones]), paired(1, variant)] if ones else [])))
    print(f"(c) vs (b): {paired(many, 'c', 'b')} at {many} connections, {paired(1, 'c', 'b')} at 1")
    print(f"\nwhy, at {many} connections (medians)")
    print(row("", ["tx per WAL flush", "waiting for a lock", "PG CPU per tx", "client CPU per tx"]))
    for variant, (label, _) in VARIANTS.items():
        runs = done[many, variant]
        cpu = [f"{median(runs, field):,.0f} µs" for field in ("pg_us", "client_us")]
        print(row(label, [f"{median(runs, 'per_sync'):.2f}", f"{median(runs, 'lock_wait'):.0%}", *cpu]))


async def serve_side(
    args: argparse.Namespace, db_url: str, db: str, admin: asyncpg.Connection, logs: Path
) -> None:
    receiver = Receiver()
    await receiver.start()
    results: list[tuple[str, dict[str, float]]] = []
    idle: list[tuple[str, float, float]] = []
    try:
        # First an install whose SQL functions have never enqueued (a schema of its own): it
        # looks for arrivals once a second, whatever the interval.
        proc, _ = await start_server(db_url, "0.005", logs / "serve-unused.log", schema="unused")
        try:
            await asyncio.sleep(3.0)
            workly_cpu, pg_cpu = await idle_cpu(admin, proc.pid, db, args.idle_seconds)
            idle.append(("0.005, functions never used", workly_cpu, pg_cpu))
        finally:
            await stop_server(proc)
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
                idle.append((f"{poll}, functions in use", workly_cpu, pg_cpu))
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
