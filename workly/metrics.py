"""Prometheus metrics: one registry per app, filled by the parts that do the work.

The enqueuer, the dispatcher and the upkeep jobs each get the Metrics object and record
what they did; nothing here touches the database on a scrape. Queue depth by status comes
from a periodic query (``QueueDepths``), not from a count per scrape.

Several worker processes (``workly serve --workers N``) share their metrics through
prometheus_client's multiprocess mode: ``workly serve`` sets ``PROMETHEUS_MULTIPROC_DIR``
before uvicorn spawns the workers, prometheus_client (which reads the variable when it is
imported) then keeps every value in a per-process file there, and a scrape of any worker
merges the files of all of them. Without the variable each app keeps its own registry.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from workly.models import TASK_STATUSES, Queue
from workly.webhooks import ENDPOINT_PREFIX
from workly.webhooks import HEALTH_STATES as ENDPOINT_STATES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
# A claim is one statement: sub-millisecond when the claim index works, so finer buckets.
_CLAIM_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_BATCH = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
M = TypeVar("M", bound=MetricWrapperBase)


class Children(Generic[M]):
    """A labelled metric's children, each looked up through ``labels()`` once: labels() takes
    a lock and rebuilds its key from strings on every call, and the hot paths (every
    delivery, every group commit) call it several times per task."""

    def __init__(self, metric: M) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


# The one queue label every endpoint's deliveries share unless per-endpoint series are asked
# for (WORKLY_METRICS_PER_ENDPOINT): 10,000 endpoints would be 10,000 series per metric.
ENDPOINTS_LABEL = "endpoints"


class Metrics:
    def __init__(self, per_endpoint: bool = False) -> None:
        self.per_endpoint = per_endpoint
        # Read here, not at import: tests build apps in one process without the variable.
        self.multiprocess_dir = os.environ.get(MULTIPROC_DIR_ENV)
        if self.multiprocess_dir is not None and values.ValueClass is values.MutexValue:
            raise RuntimeError(
                f"{MULTIPROC_DIR_ENV} was set after prometheus_client was imported: "
                "set it before the process starts"
            )
        self._depth_labels: set[tuple[str, str]] = set()
        # In multiprocess mode the values live in the files, whatever registry holds the
        # metrics; this registry is then only used to build them (render reads the files).
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.enqueued = Counter(
            "workly_tasks_enqueued",
            "Tasks stored by the API and by SQL's enqueue_task",
            ["queue"],
            registry=r,
        )
        self.deliveries = Counter(
            "workly_deliveries", "Delivery attempts by outcome (succeeded, retry, failed)",
            ["queue", "outcome"], registry=r,
        )  # fmt: skip
        self.delivery_seconds = Histogram(
            "workly_delivery_duration_seconds", "Time from sending a request to its answer or error",
            ["queue"], buckets=_SECONDS, registry=r,
        )  # fmt: skip
        self.first_attempt_latency = Histogram(
            "workly_enqueue_to_first_attempt_seconds", "Time from a task's run_at to its first attempt",
            ["queue"], buckets=_SECONDS, registry=r,
        )  # fmt: skip
        self.in_flight = Gauge(
            "workly_deliveries_in_flight", "Deliveries in flight", registry=r,
            multiprocess_mode="livesum",  # each process's own count, summed over the live ones
        )  # fmt: skip
        self.claim_batch = Histogram(
            "workly_claim_batch_size", "Tasks per claim that claimed any", buckets=_BATCH, registry=r
        )
        self.claim_seconds = Histogram(
            "workly_claim_duration_seconds", "Time each claim statement took, empty claims included",
            buckets=_CLAIM_SECONDS, registry=r,
        )  # fmt: skip
        self.index_rebuilds = Counter(
            "workly_index_rebuilds",
            "Indexes rebuilt (REINDEX CONCURRENTLY) because retention had left them bloated",
            registry=r,
        )
        self.eager_dispatches = Counter(
            "workly_eager_dispatches",
            "Tasks leased in their enqueue's transaction, delivered without a claim",
            registry=r,
        )
        self.commit_batch = Histogram(
            "workly_group_commit_size", "Requests or results per group commit", ["kind"], buckets=_BATCH,
            registry=r,
        )  # fmt: skip
        self.stale_results = Counter(
            "workly_stale_results_refused", "Results refused because their lease was taken over", registry=r
        )
        self.leases_lapsed = Counter(
            "workly_leases_lapsed",
            "Deliveries not sent because their lease might end before the request would be over "
            "(the process was stopped or kept waiting); the reaper gives them back",
            registry=r,
        )
        self.reaped = Counter(
            "workly_tasks_reaped", "Tasks returned by the reaper after their lease expired", registry=r
        )
        # Every process measures the same database: the latest measurement of a live process
        # wins. "mostrecent" needs prometheus-client 0.18 (pyproject requires 0.20, so no
        # "max" fallback); the live variant also drops what a dead worker measured last (see
        # _forget_dead_processes), such as a queue deleted after it died.
        self.queue_depth = Gauge(
            "workly_queue_tasks", "Tasks per queue and status (refreshed periodically)", ["queue", "status"],
            registry=r, multiprocess_mode="livemostrecent",
        )  # fmt: skip

        self.endpoint_deliveries = Counter(
            "workly_endpoint_deliveries", "Event delivery attempts by endpoint and outcome",
            ["endpoint", "outcome"], registry=r,
        )  # fmt: skip
        self.breaker_transitions = Counter(
            "workly_breaker_transitions", "Circuit breakers that opened (to=open) or closed (to=closed)",
            ["to"], registry=r,
        )  # fmt: skip
        self.endpoints = Gauge(
            "workly_endpoints", "Endpoints by health state (refreshed periodically)", ["state"],
            registry=r, multiprocess_mode="livemostrecent",
        )  # fmt: skip
        self.callbacks = Counter(
            "workly_callbacks", "Callback tasks enqueued for finished tasks (docs/failures.md)", registry=r
        )
        self.operation_tasks = Counter(
            "workly_operation_tasks", "Tasks bulk operations went through, by action and result",
            ["action", "result"], registry=r,
        )  # fmt: skip
        self.schedule_firings = Counter(
            "workly_schedule_firings",
            "Schedule firings by outcome: created (a task or event made at a fire time), triggered "
            "(made by a trigger), duplicate (made before), skipped (a missed time, catch_up none)",
            ["outcome"], registry=r,
        )  # fmt: skip
        self.schedule_lateness = Histogram(
            "workly_schedule_lateness_seconds",
            "Time from a schedule's fire time to its task or event being made",
            buckets=_SECONDS, registry=r,
        )  # fmt: skip

        # The children the hot paths record into (labels() once per label values).
        self.deliveries_of = Children(self.deliveries)
        self.endpoint_deliveries_of = Children(self.endpoint_deliveries)
        self.delivery_seconds_of = Children(self.delivery_seconds)
        self.first_attempt_latency_of = Children(self.first_attempt_latency)
        self.commit_batch_of = Children(self.commit_batch)
        self.enqueued_of = Children(self.enqueued)

    def set_endpoint_states(self, counts: Mapping[str, int]) -> None:
        for state in ENDPOINT_STATES:
            self.endpoints.labels(state).set(counts.get(state, 0))

    def sql_enqueued(self, counts: Mapping[str, int]) -> None:
        """Tasks SQL's enqueue_task stored (docs/sql-enqueue.md), counted as the API's are."""
        for queue, n in counts.items():
            self.enqueued_of(self.queue_label(queue)).inc(n)

    def queue_label(self, queue: str) -> str:
        """The ``queue`` label of a queue's series: an endpoint's is ENDPOINTS_LABEL, unless
        per-endpoint series were asked for."""
        if self.per_endpoint or not queue.startswith(ENDPOINT_PREFIX):
            return queue
        return ENDPOINTS_LABEL

    def set_queue_depths(self, queues: Iterable[Queue]) -> None:
        depths: dict[tuple[str, str], int] = {}
        for queue in queues:
            label = self.queue_label(queue.name)
            for status in TASK_STATUSES:
                depths[label, status] = depths.get((label, status), 0) + queue.counts.get(status, 0)
        measured = set(depths)
        for labels, depth in depths.items():
            self.queue_depth.labels(*labels).set(depth)
        for labels in self._depth_labels - measured:  # a deleted queue
            if self.multiprocess_dir is None:
                self.queue_depth.remove(*labels)  # disappears from the scrape
            else:
                # A value in the shared files cannot be removed (prometheus_client supports
                # no remove or clear there): the deleted queue reads 0 until the restart.
                self.queue_depth.labels(*labels).set(0)
        self._depth_labels = measured

    def render(self) -> bytes:
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        _forget_dead_processes(self.multiprocess_dir)
        for _ in range(_READS - 1):
            # The files are written, grown and deleted by the other workers while this one reads
            # them: a file met mid-change (deleted after the listing, or grown past what was
            # mapped) is read again, with the directory listed anew.
            with contextlib.suppress(OSError, ValueError, struct.error):
                return self._read_files(self.multiprocess_dir)
        return self._read_files(self.multiprocess_dir)

    @staticmethod
    def _read_files(path: str) -> bytes:
        registry = CollectorRegistry()  # fresh per scrape, as prometheus_client prescribes
        MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
        return generate_latest(registry)


_READS = 3  # tries at reading the workers' files for one scrape
# gauge_<live mode>_<pid>.db: the files mark_process_dead removes.
_LIVE_GAUGE_FILE = re.compile(r"gauge_live[a-z]+_(\d+)\.db")


def _forget_dead_processes(path: str) -> None:
    """Drop the live gauges (in flight, queue depth) of worker processes that are gone.

    prometheus_client's docs call ``mark_process_dead(pid)`` from gunicorn's ``child_exit``
    hook, in the master. Workly's supervisor (workly/cli/serving.py) does not, and a worker that
    crashes or is killed runs no code of its own on the way out, so each scrape does it instead:
    any process whose live-gauge file is in the directory but that no longer exists is marked
    dead. That covers graceful exits, crashes and the supervisor's replacement of a dead worker
    alike (a worker that exited counts until the supervisor reaps it, as soon as it sees it end).
    Counters and histograms of a dead worker stay: what it counted still counts.
    The directory belongs to this `workly serve` alone, so each PID in it is one of its
    workers (a PID reused by another process only delays the cleanup).
    """
    pids = set()
    for name in os.listdir(path):
        match = _LIVE_GAUGE_FILE.fullmatch(name)
        if match:
            pids.add(int(match.group(1)))
    for pid in pids - {os.getpid()}:
        if not _alive(pid):
            # FileNotFoundError: another worker's scrape got there first; the next scrape finishes.
            with contextlib.suppress(FileNotFoundError):
                mark_process_dead(pid, path)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    if os.name == "nt":
        return True  # signal 0 is CTRL_C_EVENT there
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, under another user
    return True
