"""Metrics: what the parts record, and the /metrics route over a real socket."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx
import pytest

from tests.storage.helpers import in_queue, new
from tests.support.clock import VirtualClock
from tests.support.metrics import sample
from tests.support.receiver import running_receiver
from tests.support.servers import TEST_SECRET, running_app
from workly.config import Settings
from workly.metrics import Metrics
from workly.models import Queue, QueueConfig
from workly.service.upkeep import Upkeep
from workly.service.upkeep.queue_gauges import QueueGauges
from workly.storage.contract import Storage


def test_children_record_into_their_own_label_values() -> None:
    metrics = Metrics()
    for _ in range(3):
        metrics.deliveries_of("a", "succeeded").inc()
    metrics.deliveries_of("a", "failed").inc(2)
    metrics.deliveries_of("b", "succeeded").inc()
    assert metrics.deliveries_of("a", "succeeded") is metrics.deliveries_of("a", "succeeded")
    text = metrics.render().decode()
    assert sample(text, "workly_deliveries_total", queue="a", outcome="succeeded") == 3
    assert sample(text, "workly_deliveries_total", queue="a", outcome="failed") == 2
    assert sample(text, "workly_deliveries_total", queue="b", outcome="succeeded") == 1


def test_queue_depths_replace_the_previous_ones() -> None:
    metrics = Metrics()
    now = datetime.now(UTC)
    gone = Queue("gone", QueueConfig(), {"ready": 5}, now, now)
    kept = Queue("kept", QueueConfig(), {"ready": 2, "failed": 1}, now, now)
    metrics.set_queue_depths([gone, kept])
    metrics.set_queue_depths([kept])
    text = metrics.render().decode()
    assert sample(text, "workly_queue_tasks", queue="kept", status="failed") == 1
    assert 'queue="gone"' not in text


async def test_upkeep_measures_queue_depths_periodically(storage: Storage) -> None:
    clock = VirtualClock()
    await storage.tasks.enqueue(in_queue("deep", [new() for _ in range(3)]), clock.now())
    metrics = Metrics()
    upkeep = Upkeep(clock, [QueueGauges(storage.queues, storage.webhooks, metrics, every=15)])
    await upkeep.start()
    try:
        await clock.run_for(15)
        async with asyncio.timeout(5):
            while 'queue="deep"' not in metrics.render().decode():
                await asyncio.sleep(0.01)
    finally:
        await upkeep.stop()
    assert sample(metrics.render().decode(), "workly_queue_tasks", queue="deep", status="ready") == 3


async def test_the_route_reports_enqueues_and_deliveries(sqlite_url: str) -> None:
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.script("/fails", [500])
        settings = Settings(
            database_url=sqlite_url,
            signing_secret=TEST_SECRET,
            outbound_allow="127.0.0.1",
            poll_interval=0.05,
        )
        async with running_app(settings) as base_url, httpx.AsyncClient(base_url=base_url) as http:
            for path in ["/ok", "/ok", "/fails"]:
                task = {"url": receiver.url(path), "max_attempts": 1}
                assert (await http.post("/v1/queues/m/tasks", json=task)).status_code == 201
            await receiver.wait_for("/fails", 1)
            await receiver.wait_for("/ok", 2)
            async with asyncio.timeout(5):
                while "failed" not in (text := (await http.get("/metrics")).text):
                    await asyncio.sleep(0.05)
            response = await http.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert sample(text, "workly_tasks_enqueued_total", queue="m") == 3
    assert sample(text, "workly_deliveries_total", queue="m", outcome="succeeded") == 2
    assert sample(text, "workly_deliveries_total", queue="m", outcome="failed") == 1
    assert sample(text, "workly_delivery_duration_seconds_count", queue="m") == 3
    assert sample(text, "workly_enqueue_to_first_attempt_seconds_count", queue="m") == 3
    assert sample(text, "workly_deliveries_in_flight") == 0
    # Each task went out either leased by its enqueue (eager dispatch) or through a claim.
    assert sample(text, "workly_eager_dispatches_total") + sample(text, "workly_claim_batch_size_sum") == 3
    assert sample(text, "workly_group_commit_size_count", kind="results") >= 1
    assert sample(text, "workly_claim_duration_seconds_count") >= 1  # the dispatcher's first claim
    assert sample(text, "workly_claim_duration_seconds_sum") > 0


@pytest.mark.parametrize(("public", "status"), [(False, 401), (True, 200)])
async def test_metrics_need_a_token_unless_public(sqlite_url: str, public: bool, status: int) -> None:
    settings = Settings(
        database_url=sqlite_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens="t" * 20,
        public_metrics=public,
    )  # fmt: skip
    async with running_app(settings) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.get("/metrics")).status_code == status
        assert (
            await http.get("/metrics", headers={"authorization": "Bearer " + "t" * 20})
        ).status_code == 200


@pytest.mark.parametrize("per_endpoint", [False, True])
def test_endpoint_queues_share_one_depth_series_unless_asked_for(per_endpoint: bool) -> None:
    now = datetime(2026, 12, 7, tzinfo=UTC)
    queues = [
        Queue(name, QueueConfig(), {"ready": ready}, now, now)
        for name, ready in (("ep_one", 2), ("ep_two", 3), ("orders", 5))
    ]
    metrics = Metrics(per_endpoint=per_endpoint)
    metrics.set_queue_depths(queues)

    def depth(queue: str) -> float | None:
        return metrics.registry.get_sample_value("workly_queue_tasks", {"queue": queue, "status": "ready"})

    assert depth("orders") == 5
    if per_endpoint:
        assert (depth("ep_one"), depth("ep_two"), depth("endpoints")) == (2, 3, None)
    else:
        assert (depth("ep_one"), depth("ep_two"), depth("endpoints")) == (None, None, 5)
