"""A sample every few seconds: throughput, latency, backlog, claim time, memory, table sizes,
CPU and, on PostgreSQL, the WAL and commits per second.

Claim time comes from each process's ``workly_claim_duration_seconds`` histogram: the
difference of two scrapes is the claims of that window (a restarted process starts its
counters again from zero: then its whole current histogram is the window's). Memory is the
resident set of every Workly process and of the soak itself, read from /proc; CPU is in
cores (CPU seconds per second) for the Workly processes together, the database server (a
postmaster and its children, when the soak runs its own cluster) and the soak itself.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tools.soak.cpu import CpuMeter, tree
from tools.soak.database import Probe
from tools.soak.fleet import Fleet, rss_mib
from tools.soak.ledger import Ledger
from tools.soak.workload import Workload
from workly.dispatch.http import HttpError
from workly.loadtest.stats import percentile

Histogram = dict[float, float]  # upper bound → cumulative count (+Inf as math.inf)
_CLAIM = "workly_claim_duration_seconds"


@dataclass
class Sample:
    t: float  # seconds since the soak began
    phase: str  # "load" or "drain"
    accepted_per_s: float
    requests_per_s: float
    delivered_per_s: float  # deliveries answered 2xx for the first time
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    backlog: int | None  # ready + running over every queue
    claims: int
    claim_mean_ms: float | None
    claim_p99_ms: float | None  # the bucket bound the 99th percentile falls under
    rss_mib: dict[str, float | None]
    sizes: dict[str, float]
    cpu_cores: dict[str, float]  # workly (all processes), database, soak
    database_per_s: dict[str, float]  # WAL bytes, WAL writes and syncs, commits (PostgreSQL)

    def as_json(self) -> dict[str, object]:
        return self.__dict__.copy()


@dataclass
class Monitor:
    fleet: Fleet
    workload: Workload
    ledger: Ledger
    probe: Probe
    began: float
    database_pid: Callable[[], int | None] = lambda: None
    phase: str = "load"
    samples: list[Sample] = field(default_factory=list)
    _cpu: CpuMeter = field(default_factory=CpuMeter)
    _counters: dict[str, float] = field(default_factory=dict)
    _last: float = 0.0
    _accepted: int = 0
    _histograms: dict[int, tuple[int, Histogram, float]] = field(
        default_factory=dict
    )  # member → starts, buckets, sum

    async def sample(self) -> Sample:
        now = time.monotonic()
        seconds = max(now - (self._last or self.began), 1e-3)
        self._last = now
        requests, first_successes, latencies = self.ledger.take_window()
        accepted = len(self.workload.accepted)
        accepted_delta, self._accepted = accepted - self._accepted, accepted
        claims, mean, p99 = await self._claims()
        try:
            sizes = await self.probe.sizes()
        except Exception as exc:  # the database may be restarting: a gap in the plot
            sizes = {"error": 1.0}
            print(f"soak: sizes unavailable: {type(exc).__name__}: {exc}", flush=True)
        rss: dict[str, float | None] = {f"workly-{k}": v for k, v in self.fleet.rss_mib().items()}
        rss["soak"] = rss_mib(os.getpid())
        cpu = {
            "workly": self._cpu.used(m.pid for m in self.fleet.members if m.pid is not None) / seconds,
            "soak": self._cpu.used([os.getpid()]) / seconds,
        }
        if (postmaster := self.database_pid()) is not None:
            cpu["database"] = self._cpu.used(tree(postmaster)) / seconds
        sample = Sample(
            t=round(now - self.began, 1), phase=self.phase, accepted_per_s=accepted_delta / seconds,
            requests_per_s=requests / seconds, delivered_per_s=first_successes / seconds,
            latency_p50_ms=_ms(percentile(latencies, 0.50)) if latencies else None,
            latency_p99_ms=_ms(percentile(latencies, 0.99)) if latencies else None,
            backlog=await self._backlog(), claims=claims, claim_mean_ms=mean, claim_p99_ms=p99,
            rss_mib=rss, sizes=sizes, cpu_cores=cpu, database_per_s=await self._rates(seconds),
        )  # fmt: skip
        self.samples.append(sample)
        return sample

    async def _rates(self, seconds: float) -> dict[str, float]:
        """Per second since the last sample; nothing across a crash restart (counters reset)."""
        try:
            counters = await self.probe.counters()
        except Exception:  # restarting: a gap
            return {}
        previous, self._counters = self._counters, counters
        if not previous or any(counters[k] < previous.get(k, 0) for k in counters):
            return {}
        return {name: (value - previous[name]) / seconds for name, value in counters.items()}

    async def _get(self, base: str, path: str) -> bytes | None:
        try:
            response = await self.workload.client.request(
                "GET", f"{base}{path}", {"authorization": self.workload.authorization}, b"", timeout=5
            )
        except (HttpError, TimeoutError):
            return None
        return response.body if response.status == 200 else None

    async def _backlog(self) -> int | None:
        for member in self.fleet.live():
            body = await self._get(member.base_url, "/v1/queues")
            if body is not None:
                queues = json.loads(body)["queues"]
                return sum(q["counts"].get("ready", 0) + q["counts"].get("running", 0) for q in queues)
        return None

    async def _claims(self) -> tuple[int, float | None, float | None]:
        """Claims in this window over every process: how many, mean and p99 in ms."""
        total: Histogram = {}
        seconds = 0.0
        for member in self.fleet.live():
            body = await self._get(member.base_url, "/metrics")
            if body is None:
                continue
            buckets, total_seconds = parse_histogram(body.decode(), _CLAIM)
            starts, previous, previous_sum = self._histograms.get(member.index, (0, {}, 0.0))
            if starts != member.starts:  # restarted: counters began again at zero
                previous, previous_sum = {}, 0.0
            self._histograms[member.index] = (member.starts, buckets, total_seconds)
            for bound, count in buckets.items():
                total[bound] = total.get(bound, 0.0) + count - previous.get(bound, 0.0)
            seconds += total_seconds - previous_sum
        count = int(total.get(float("inf"), 0))
        if not count:
            return 0, None, None
        return count, _ms(seconds / count), _ms(quantile_bound(total, 0.99))


def parse_histogram(text: str, name: str) -> tuple[Histogram, float]:
    """The cumulative buckets and the sum of one unlabelled histogram in Prometheus text."""
    buckets: Histogram = {}
    total = 0.0
    for line in text.splitlines():
        if line.startswith(f'{name}_bucket{{le="'):
            bound = line[len(name) + 12 : line.index('"', len(name) + 12)]
            buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
        elif line.startswith(f"{name}_sum "):
            total = float(line.rsplit(" ", 1)[1])
    return buckets, total


def quantile_bound(buckets: Histogram, q: float) -> float:
    """The upper bound of the bucket the q-quantile falls in (Prometheus' resolution)."""
    ordered = sorted(buckets.items())
    wanted = q * ordered[-1][1]
    for bound, count in ordered:
        if count >= wanted:
            return bound
    return ordered[-1][0]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
