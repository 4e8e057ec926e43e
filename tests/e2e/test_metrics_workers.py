"""Metrics across worker processes: `workly serve --workers 2` on PostgreSQL answers /metrics
from whichever worker a connection reaches, and every answer counts the work of both.

Each enqueue and each scrape opens its own connection, so the kernel hands them to either
worker: without shared metrics, a scrape would report only what its worker did.
"""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict, mmap_key

from tests.e2e.conftest import drop_workly_env, serve_args
from tests.support.receiver import running_receiver
from tests.support.servers import (
    TEST_SECRET,
    TEST_SERVER_ENV,
    api_client,
    free_port,
    wait_ready,
    workly_subprocess,
)
from tests.test_metrics import sample

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]
TASKS, PER_BATCH, SCRAPES = 200, 10, 12
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def earlier_run(directory: Path) -> None:
    """A counter file as a crashed earlier run leaves it: 1,000 enqueues in queue m."""
    stale = MmapedDict(str(directory / "counter_999999.db"))
    key = mmap_key(
        "workly_tasks_enqueued", "workly_tasks_enqueued_total", ["queue"], ["m"], "Tasks stored by the API"
    )
    stale.write_value(key, 1000.0, 0.0)
    stale.close()


def one_connection_per_request(port: int) -> httpx.AsyncClient:
    """A client that opens a new connection for every request, which either worker may accept."""
    client = api_client(port, timeout=10)
    client.headers["connection"] = "close"
    return client


@pytest.mark.parametrize("directory", ["temporary", "given"])
async def test_every_scrape_counts_the_work_of_all_workers(
    directory: str, pg_fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    temp_root = tmp_path / "tmp"  # the server's TMPDIR: where its own metrics directory goes
    temp_root.mkdir()
    env = {
        "WORKLY_DATABASE_URL": pg_fresh_db,
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        **TEST_SERVER_ENV,
        "WORKLY_POLL_INTERVAL": "0.2",
        "WORKLY_LOG_LEVEL": "warning",
        "TMPDIR": str(temp_root),
    }
    given = tmp_path / "prometheus"
    if directory == "given":
        given.mkdir()
        earlier_run(given)
        env[MULTIPROC_ENV] = str(given)
    port = free_port()
    log = tmp_path / "workly.log"
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.delay("/m", 0.01)
        with workly_subprocess([*serve_args(port), "--workers", "2"], env, port, log) as server:
            await asyncio.to_thread(wait_ready, server, port, log)
            made = list(temp_root.glob("workly-metrics-*"))
            if directory == "temporary":
                assert len(made) == 1 and stat.S_IMODE(made[0].stat().st_mode) == 0o700
            else:
                assert made == [] and not (given / "counter_999999.db").exists()
            async with one_connection_per_request(port) as client:
                assert (await client.put("/v1/queues/m", json={"max_concurrency": 50})).status_code == 201
                for _ in range(TASKS // PER_BATCH):
                    tasks = [{"url": receiver.url("/m")}] * PER_BATCH
                    response = await client.post("/v1/queues/m/tasks/batch", json={"tasks": tasks})
                    assert response.status_code == 201, response.text
                async with asyncio.timeout(20):
                    while (await queue_counts(client)).get("succeeded", 0) < TASKS:
                        await asyncio.sleep(0.1)
                for _ in range(SCRAPES):
                    response = await client.get("/metrics")
                    assert response.status_code == 200, response.text + log.read_text()[-3000:]
                    text = response.text
                    assert sample(text, "workly_tasks_enqueued_total", queue="m") == TASKS
                    assert sample(text, "workly_deliveries_total", queue="m", outcome="succeeded") == TASKS
                    assert sample(text, "workly_delivery_duration_seconds_count", queue="m") == TASKS
                    assert sample(text, "workly_deliveries_in_flight") == 0
    assert len(receiver.at("/m")) == TASKS
    if directory == "temporary":
        assert not made[0].exists(), "workly serve removes its metrics directory when it exits"
    else:
        assert given.is_dir(), "a directory the user gave is kept"


async def queue_counts(client: httpx.AsyncClient) -> dict[str, int]:
    response = await client.get("/v1/queues/m")
    assert response.status_code == 200, response.text
    counts: dict[str, int] = response.json()["counts"]
    return counts
