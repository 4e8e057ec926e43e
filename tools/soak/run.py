"""One soak, from the first process started to the report written.

1. Receivers up (three origins), the database (PostgreSQL: a cluster of the soak's own,
   fsync on, so that it can be restarted; SQLite: a file in the soak's directory), the
   Workly processes started by the real CLI, the queues and endpoints made.
2. For ``duration`` seconds: the load at ``rate`` (open loop: send n goes at start + n/rate
   whatever happened to the others, at most ``concurrency`` in flight), a batch of
   ``burst_size`` every ``burst_every`` seconds, the faults on their schedule, a sample
   every ``sample_every`` seconds; the stall watches (tools/soak/stalls.py) until the drain ends.
3. The load stops, every fault still in force ends, and the soak waits (at most ``drain``
   seconds) until no task is ready or running.
4. The books (tools/soak/books.py) and the report (tools/soak/report.py).

Everything it starts it stops, by PID; the cluster's directory goes unless ``keep``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tools.soak import report
from tools.soak.books import Books, balance
from tools.soak.cluster import Cluster
from tools.soak.database import PostgresProbe, Probe, SqliteProbe
from tools.soak.faults import Injector, plan
from tools.soak.fleet import SECRET, TOKEN, Fleet
from tools.soak.ledger import Ledger
from tools.soak.monitor import Monitor, Sample
from tools.soak.receiver import Receiver
from tools.soak.stalls import StallWatch
from tools.soak.workload import LEASE_MARGIN, LIMITS, TIMEOUT, Targets, Workload

DB_TIMEOUT = 2.0  # a lease margin must be at least three statement timeouts


@dataclass
class SoakSettings:
    backend: str = "postgres"  # or "sqlite"
    processes: int = 3
    duration: float = 1800.0
    rate: float = 500.0
    concurrency: int = 256
    burst_every: float = 60.0
    burst_size: int = 500
    fault_every: float = 120.0
    faults: list[str] = field(default_factory=lambda: ["kill", "pause", "database"])
    outage: float = 180.0
    retention: float = 120.0
    failed_retention: float = 300.0  # WORKLY_FAILED_RETENTION: the failures go too (issue 43)
    sample_every: float = 10.0
    drain: float = 300.0
    database_url: str | None = None  # an existing PostgreSQL instead of the soak's own cluster
    out: Path = Path("soak-out")
    keep: bool = False
    seed: int = 1
    command: str = ""

    @property
    def pause_seconds(self) -> float:
        """Longer than a lease (attempt timeout + margin), so the others' reapers act."""
        return TIMEOUT + LEASE_MARGIN + 5


def process_env(settings: SoakSettings) -> dict[str, str]:
    return {
        "WORKLY_SIGNING_SECRET": SECRET,
        "WORKLY_API_TOKENS": TOKEN,
        "WORKLY_OUTBOUND_ALLOW": "127.0.0.0/8",
        "WORKLY_RETENTION": f"{settings.retention:g}",
        "WORKLY_FAILED_RETENTION": f"{settings.failed_retention:g}",
        "WORKLY_LEASE_MARGIN": f"{LEASE_MARGIN:g}",
        "WORKLY_DB_TIMEOUT": f"{DB_TIMEOUT:g}",
        "WORKLY_REAP_INTERVAL": "1",
        "WORKLY_BREAKER_COOLDOWN": "2",
        "WORKLY_SHUTDOWN_GRACE": "5",
    }


class Soak:
    def __init__(self, settings: SoakSettings) -> None:
        self.settings = settings
        self.ledger = Ledger()
        self.receivers = {
            "good": Receiver("good", self.ledger, LIMITS),
            "rough": Receiver("rough", self.ledger),
            "outage": Receiver("outage", self.ledger),
        }
        self.cluster: Cluster | None = None
        self.sent: Counter[str] = Counter()
        self._serials = itertools.count()
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self) -> tuple[str, Books]:
        settings = self.settings
        settings.out.mkdir(parents=True, exist_ok=True)
        for receiver in self.receivers.values():
            await receiver.start()
        fleet, probe = self._database_and_fleet()
        urls = {name: receiver.url for name, receiver in self.receivers.items()}
        workload = Workload(Targets(**urls), self.ledger, settings.seed)
        try:
            await fleet.start_all()
            injector = Injector(
                fleet, workload, self.receivers["outage"], self.cluster, settings.pause_seconds,
                settings.outage, settings.seed,
            )  # fmt: skip
            await workload.set_up()
            return await self._soak(fleet, workload, injector, probe)
        finally:
            await asyncio.to_thread(fleet.stop_all)
            await probe.close()
            await workload.client.close()
            for receiver in self.receivers.values():
                await receiver.stop()
            if self.cluster is not None:
                self.cluster.stop()
                if not settings.keep:
                    shutil.rmtree(self.cluster.data, ignore_errors=True)

    def _database_and_fleet(self) -> tuple[Fleet, Probe]:
        settings = self.settings
        env = process_env(settings)
        if settings.backend == "sqlite":
            database = settings.out / "workly.db"
            for stale in settings.out.glob("workly.db*"):
                stale.unlink()
            return Fleet.sqlite(settings.out, env, database), SqliteProbe(database)
        url = settings.database_url
        if url is None:
            self.cluster = Cluster(fsync=True, parent=tempfile.gettempdir())
            self.cluster.start()
            url = self.cluster.url
        env["WORKLY_DATABASE_URL"] = url
        return Fleet.postgres(settings.out, env, settings.processes), PostgresProbe(url)

    async def _soak(
        self, fleet: Fleet, workload: Workload, injector: Injector, probe: Probe
    ) -> tuple[str, Books]:
        settings = self.settings
        faults = plan(settings.duration, settings.fault_every, settings.faults, settings.outage)
        postmaster = self.cluster.postmaster_pid if self.cluster is not None else (lambda: None)
        monitor = Monitor(fleet, workload, self.ledger, probe, time.monotonic(), postmaster)
        began, began_wall = monitor.began, time.time()
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        stalls = StallWatch()
        await stalls.start(began_wall)
        background = [
            asyncio.create_task(injector.run(faults, began)),
            asyncio.create_task(self._bursts(workload, began)),
            asyncio.create_task(self._sampling(monitor)),
        ]
        try:
            await self._send_load(workload, began)
            background[1].cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await background[1]
            await asyncio.wait_for(background[0], timeout=settings.pause_seconds + 60)
            await injector.end_all()
            while self._sending:
                await asyncio.sleep(0.1)
            background[2].cancel()  # the drain samples on its own
            monitor.phase = "drain"
            drained = await self._drain(monitor)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await stalls.stop()
        await monitor.sample()
        rows = await probe.tasks()
        books = balance(
            workload.accepted,
            rows,
            self.ledger,
            faults,
            workload.refused,
            began_wall,
            workload.errors + stalls.errors,
            workload.given_up,
            stalls.stalls,
        )
        run = report.Run(
            backend=settings.backend, processes=len(fleet.members), duration=settings.duration,
            rate=settings.rate, retention=settings.retention,
            failed_retention=settings.failed_retention, started=started, command=settings.command,
            sent=dict(self.sent), accepted=len(workload.accepted), given_up=workload.given_up,
            retried=workload.retried, drain_seconds=drained,
            max_in_flight=dict(self.ledger.max_in_flight),
            limits=LIMITS,
        )  # fmt: skip
        text = report.write(settings.out, run, books, monitor.samples, faults, stalls.stalls, began_wall)
        return text, books

    async def _send_load(self, workload: Workload, began: float) -> None:
        settings = self.settings
        in_flight = asyncio.Semaphore(settings.concurrency)
        interval = 1.0 / settings.rate
        for n in itertools.count():
            at = began + n * interval
            if at - began >= settings.duration:
                return
            wait = at - time.monotonic()
            if wait > 0.0005:
                await asyncio.sleep(wait)
            await in_flight.acquire()
            kind = workload.next_kind()
            self.sent[kind] += 1
            task = asyncio.create_task(workload.send(next(self._serials), kind))
            self._sending.add(task)
            task.add_done_callback(lambda done: (self._sending.discard(done), in_flight.release()))

    async def _bursts(self, workload: Workload, began: float) -> None:
        settings = self.settings
        if settings.burst_every <= 0 or settings.burst_size <= 0:
            return
        for n in itertools.count(1):
            await asyncio.sleep(max(0.0, began + n * settings.burst_every - time.monotonic()))
            serials = [next(self._serials) for _ in range(settings.burst_size)]
            self.sent["burst"] += len(serials)
            task = asyncio.create_task(workload.burst(serials[0], len(serials)))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _sampling(self, monitor: Monitor) -> None:
        while True:
            await asyncio.sleep(self.settings.sample_every)
            sample = await monitor.sample()
            _progress(sample)
            # The ledger only grows (the books need every delivery's record): what is alive
            # now stays alive, so the collector need not walk it again. Unfrozen, its full
            # collections over a million records stopped the receivers for seconds (stalls of
            # 1.4-2.9 s in a 30-minute run), long enough to approach an attempt's timeout.
            # Collected first, so no cycle that is already garbage is frozen with it (cheap:
            # only what came since the last freeze is walked).
            gc.collect()
            gc.freeze()

    async def _drain(self, monitor: Monitor) -> float:
        """Seconds until nothing was ready or running (or ``drain`` ran out)."""
        started = time.monotonic()
        while time.monotonic() - started < self.settings.drain:
            await asyncio.sleep(min(2.0, self.settings.sample_every))
            sample = await monitor.sample()
            _progress(sample)
            if sample.backlog == 0:
                break
        return time.monotonic() - started


def _progress(sample: Sample) -> None:
    print(
        f"{sample.t:7.1f}s {sample.phase}  accepted/s {sample.accepted_per_s:6.0f}  delivered/s "
        f"{sample.delivered_per_s:6.0f}  p50 {sample.latency_p50_ms or 0:7.1f} ms  p99 "
        f"{sample.latency_p99_ms or 0:8.1f} ms  backlog {sample.backlog}  claim {sample.claim_mean_ms} ms  "
        f"tasks {sample.sizes.get('tasks_live', '-')}",
        file=sys.stderr,
        flush=True,
    )


def command_line(argv: list[str]) -> str:
    return shlex.join(["python", "-m", "tools.soak", *argv])
