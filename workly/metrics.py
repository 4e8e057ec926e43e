"""Prometheus metrics: one registry per app, filled by the parts that do the work.

The enqueuer, the dispatcher and the housekeeper each get the Metrics object and record
what they did; nothing here touches the database on a scrape. Queue depth by status comes
from a periodic query (``QueueDepths``), not from a count per scrape.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from workly.models import TASK_STATUSES, Queue

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_BATCH = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.enqueued = Counter("workly_tasks_enqueued", "Tasks stored by the API", ["queue"], registry=r)
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
            "workly_deliveries_in_flight", "Deliveries in flight in this process", registry=r
        )
        self.claim_batch = Histogram(
            "workly_claim_batch_size", "Tasks per claim that claimed any", buckets=_BATCH, registry=r
        )
        self.commit_batch = Histogram(
            "workly_group_commit_size", "Requests or results per group commit", ["kind"], buckets=_BATCH,
            registry=r,
        )  # fmt: skip
        self.stale_results = Counter(
            "workly_stale_results_refused", "Results refused because their lease was taken over", registry=r
        )
        self.reaped = Counter(
            "workly_tasks_reaped", "Tasks returned by the reaper after their lease expired", registry=r
        )
        self.queue_depth = Gauge(
            "workly_queue_tasks", "Tasks per queue and status (refreshed periodically)", ["queue", "status"],
            registry=r,
        )  # fmt: skip

    def set_queue_depths(self, queues: Iterable[Queue]) -> None:
        self.queue_depth.clear()  # a deleted queue disappears from the scrape
        for queue in queues:
            for status in TASK_STATUSES:
                self.queue_depth.labels(queue.name, status).set(queue.counts.get(status, 0))

    def render(self) -> bytes:
        return generate_latest(self.registry)
