"""Housekeeping: when Workly vacuums, and that vacuuming keeps the claim's scan short."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from tests.storage.helpers import new, result_for
from tests.support.clock import VirtualClock
from workly.clock import SystemClock
from workly.metrics import Metrics
from workly.models import QueueConfig
from workly.service.housekeeping import Housekeeper
from workly.storage.base import Storage
from workly.storage.postgres import PostgresStorage
from workly.storage.queries import postgres_queries


class VacuumCounter:
    """Only what Housekeeper calls: whether the database vacuums itself, and vacuum."""

    def __init__(self, autovacuum: bool) -> None:
        self.autovacuum = autovacuum
        self.vacuums = 0

    async def needs_vacuum(self) -> bool:
        return not self.autovacuum

    async def vacuum(self) -> None:
        self.vacuums += 1


async def run_for(storage: VacuumCounter, interval: float | None, seconds: float = 0.2) -> int:
    keeper = Housekeeper(
        storage,  # type: ignore[arg-type]
        SystemClock(),
        reap_interval=0,
        work_available=lambda: None,
        vacuum_interval=interval,
        auto_vacuum_interval=0.02,
        fold_interval=0,
    )
    await keeper.start()
    await asyncio.sleep(seconds)
    await keeper.stop()
    return storage.vacuums


async def test_the_reaper_runs_periodically_and_wakes_the_dispatcher(storage: Storage) -> None:
    clock = VirtualClock()
    await storage.enqueue([new()], clock.now())
    await storage.claim_tasks(10, clock.now(), uuid.uuid4().hex, 1.0)
    clock.advance(3600)  # long past the lease
    wakes: list[None] = []
    keeper = Housekeeper(
        storage, clock, reap_interval=5, work_available=lambda: wakes.append(None), vacuum_interval=0
    )
    await keeper.start()
    try:
        await clock.run_for(4.9)
        assert keeper.reaped == 0  # not before its interval
        await clock.run_for(0.1)
        async with asyncio.timeout(10):
            while not wakes:
                await asyncio.sleep(0.01)
    finally:
        await keeper.stop()
    assert keeper.reaped == 1
    assert len((await storage.claim_tasks(10, clock.now(), uuid.uuid4().hex, 1.0)).tasks) == 1


@pytest.mark.parametrize(
    ("autovacuum", "interval", "vacuums"),
    [
        (False, None, True),  # the server does not vacuum: Workly does
        (True, None, False),  # autovacuum runs: Workly leaves it to it
        (True, 0.02, True),  # an explicit interval always applies
        (False, 0, False),  # 0 turns it off
    ],
)
async def test_when_workly_vacuums(autovacuum: bool, interval: float | None, vacuums: bool) -> None:
    assert (await run_for(VacuumCounter(autovacuum), interval) >= 2) is vacuums


@pytest.mark.postgres
async def test_postgres_knows_whether_autovacuum_is_on(pg_url: str) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        conn = await asyncpg.connect(pg_url)
        try:
            setting = await conn.fetchval("SHOW autovacuum")
        finally:
            await conn.close()
        assert await storage.needs_vacuum() is (setting == "off")
    finally:
        await storage.close()


async def _claim_buffers(url: str) -> int:
    """Buffers the claim's scan of its index touches (rolled back: nothing is claimed)."""
    conn = await asyncpg.connect(url)
    transaction = conn.transaction()
    await transaction.start()
    try:
        claim = postgres_queries().claim_tasks
        sql = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + claim.sql
        params = {"now": datetime.now(UTC), "limit": 100, "lease_token": "probe", "lease_margin": 30.0}
        raw = await conn.fetchval(sql, *claim.args(params))
    finally:
        await transaction.rollback()
        await conn.close()
    return _index_scan_buffers(json.loads(raw)[0]["Plan"], "tasks_claim")


def _index_scan_buffers(node: dict[str, Any], index: str) -> int:
    """Buffers of the plan's scans of ``index``: where dead versions would slow the claim."""
    own = int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))
    found = own if node.get("Index Name") == index else 0
    return found + sum(_index_scan_buffers(child, index) for child in node.get("Plans", []))


@pytest.mark.postgres
async def test_vacuum_clears_dead_versions_from_the_claims_path(pg_url: str) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        now = datetime.now(UTC)
        await storage.put_queue("q", QueueConfig(max_concurrency=10_000), now)
        for _ in range(6):
            await storage.enqueue([new() for _ in range(500)], now)
            claimed = (await storage.claim_tasks(500, now, uuid.uuid4().hex, 30)).tasks
            await storage.record_results([result_for(c, now, "succeeded") for c in claimed], now)
        before = await _claim_buffers(pg_url)
        await storage.vacuum()
        after = await _claim_buffers(pg_url)
    finally:
        await storage.close()
    assert after * 3 < before, f"claim touched {before} buffers before vacuum, {after} after"


async def test_retention_prunes_old_succeeded_tasks_in_batches(storage: Storage) -> None:
    clock = VirtualClock()
    await storage.enqueue([new() for _ in range(3)], clock.now())
    claimed = (await storage.claim_tasks(10, clock.now(), uuid.uuid4().hex, 30.0)).tasks
    await storage.record_results([result_for(c, clock.now(), "succeeded") for c in claimed], clock.now())
    clock.advance(8 * 86400)
    keeper = Housekeeper(
        storage, clock, reap_interval=0, work_available=lambda: None, vacuum_interval=0,
        retention=7 * 86400, prune_interval=60,
    )  # fmt: skip
    await keeper.start()
    try:
        await clock.run_for(60)
        async with asyncio.timeout(10):
            while keeper.pruned < 3:
                await asyncio.sleep(0.01)
    finally:
        await keeper.stop()
    queue = await storage.get_queue("q")
    assert queue is not None
    assert queue.counts["succeeded"] == 0


class Rebuilder(VacuumCounter):
    """Rebuilds one index on its first call, none after."""

    def __init__(self) -> None:
        super().__init__(autovacuum=True)
        self.calls = 0

    async def rebuild_bloated_indexes(self) -> list[str]:
        self.calls += 1
        return ["tasks_id_key"] if self.calls == 1 else []


async def test_bloated_indexes_are_looked_for_periodically_and_counted() -> None:
    storage, metrics = Rebuilder(), Metrics()
    keeper = Housekeeper(
        storage,  # type: ignore[arg-type]
        SystemClock(), reap_interval=0, work_available=lambda: None, vacuum_interval=0, fold_interval=0,
        depth_interval=0, probe_interval=0, recount_interval=0, reindex_interval=0.02, metrics=metrics,
    )  # fmt: skip
    await keeper.start()
    try:
        async with asyncio.timeout(5):
            while storage.calls < 3:
                await asyncio.sleep(0.01)
    finally:
        await keeper.stop()
    assert keeper.rebuilt == ["tasks_id_key"]
    assert metrics.registry.get_sample_value("workly_index_rebuilds_total") == 1
