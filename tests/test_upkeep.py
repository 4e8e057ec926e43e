"""Upkeep (workly/service/upkeep): its maintainers run at their intervals; when Workly
vacuums, and that vacuuming keeps the claim's scan short."""

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
from workly.config import Settings
from workly.delivery_stats import Rollup
from workly.metrics import Metrics
from workly.models import QueueConfig
from workly.service.assembly import maintainers
from workly.service.delivery_history import DeliveryHistory
from workly.service.upkeep import Upkeep
from workly.service.upkeep.index_rebuilds import IndexRebuilds
from workly.service.upkeep.reaper import Reaper
from workly.service.upkeep.retention import Retention
from workly.service.upkeep.vacuum import Vacuum
from workly.storage.contract import Storage
from workly.storage.factory import open_storage
from workly.storage.postgres import PostgresStorage
from workly.storage.queries import postgres_queries


class VacuumCounter:
    """Only what vacuuming calls: whether the database vacuums itself, and vacuum."""

    def __init__(self, autovacuum: bool) -> None:
        self.autovacuum = autovacuum
        self.vacuums = 0

    async def needs_vacuum(self) -> bool:
        return not self.autovacuum

    async def vacuum(self) -> None:
        self.vacuums += 1


async def vacuums_in(counter: VacuumCounter, setting: float | None, seconds: float = 60) -> int:
    """How many vacuums ``seconds`` of virtual time see, the automatic interval being 10 s."""
    clock = VirtualClock()
    upkeep = Upkeep(clock, [Vacuum(counter, counter, setting, auto_every=10)])
    await upkeep.start()
    try:
        await clock.run_for(seconds)
    finally:
        await upkeep.stop()
    return counter.vacuums


async def test_the_reaper_runs_periodically_and_wakes_the_dispatcher(storage: Storage) -> None:
    clock = VirtualClock()
    await storage.tasks.enqueue([new()], clock.now())
    await storage.dispatch.claim_tasks(10, clock.now(), uuid.uuid4().hex, 1.0)
    clock.advance(3600)  # long past the lease
    wakes: list[None] = []
    keeper = Reaper(storage.upkeep, clock, lambda: wakes.append(None), Metrics(), every=5)
    upkeep = Upkeep(clock, [keeper])
    await upkeep.start()
    try:
        await clock.run_for(4.9)
        assert keeper.reaped == 0  # not before its interval
        await clock.run_for(0.1)
        async with asyncio.timeout(10):
            while not wakes:
                await asyncio.sleep(0.01)
    finally:
        await upkeep.stop()
    assert keeper.reaped == 1
    assert len((await storage.dispatch.claim_tasks(10, clock.now(), uuid.uuid4().hex, 1.0)).tasks) == 1


@pytest.mark.parametrize(
    ("autovacuum", "interval", "vacuums"),
    [
        (False, None, 6),  # the server does not vacuum: Workly does, every 10 s
        (True, None, 0),  # autovacuum runs: Workly leaves it to it
        (True, 20, 3),  # an explicit interval always applies
        (False, 0, 0),  # 0 turns it off
    ],
)
async def test_when_workly_vacuums(autovacuum: bool, interval: float | None, vacuums: int) -> None:
    assert await vacuums_in(VacuumCounter(autovacuum), interval, seconds=60) == vacuums


@pytest.mark.postgres
async def test_postgres_knows_whether_autovacuum_is_on(pg_url: str) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        conn = await asyncpg.connect(pg_url)
        try:
            setting = await conn.fetchval("SHOW autovacuum")
        finally:
            await conn.close()
        assert await storage.database.needs_vacuum() is (setting == "off")
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
        await storage.queues.put_queue("q", QueueConfig(max_concurrency=10_000), now)
        for _ in range(6):
            await storage.tasks.enqueue([new() for _ in range(500)], now)
            claimed = (await storage.dispatch.claim_tasks(500, now, uuid.uuid4().hex, 30)).tasks
            await storage.dispatch.record_results([result_for(c, now, "succeeded") for c in claimed], now)
        before = await _claim_buffers(pg_url)
        await storage.upkeep.vacuum()
        after = await _claim_buffers(pg_url)
    finally:
        await storage.close()
    assert after * 3 < before, f"claim touched {before} buffers before vacuum, {after} after"


async def test_retention_prunes_old_succeeded_tasks_in_batches(storage: Storage) -> None:
    clock = VirtualClock()
    await storage.tasks.enqueue([new() for _ in range(3)], clock.now())
    claimed = (await storage.dispatch.claim_tasks(10, clock.now(), uuid.uuid4().hex, 30.0)).tasks
    await storage.dispatch.record_results(
        [result_for(c, clock.now(), "succeeded") for c in claimed], clock.now()
    )
    clock.advance(8 * 86400)
    keeper = Retention(storage.retention, clock, retention=7 * 86400, every=60)
    upkeep = Upkeep(clock, [keeper])
    await upkeep.start()
    try:
        await clock.run_for(60)
        async with asyncio.timeout(10):
            while keeper.pruned < 3:
                await asyncio.sleep(0.01)
    finally:
        await upkeep.stop()
    queue = await storage.queues.get_queue("q")
    assert queue is not None
    assert queue.counts["succeeded"] == 0


class Rebuilder:
    """Rebuilds one index on its first call, none after."""

    def __init__(self) -> None:
        self.calls = 0

    async def rebuild_bloated_indexes(self) -> list[str]:
        self.calls += 1
        return ["tasks_id_key"] if self.calls == 1 else []


async def test_bloated_indexes_are_looked_for_periodically_and_counted() -> None:
    clock, store, metrics = VirtualClock(), Rebuilder(), Metrics()
    keeper = IndexRebuilds(store, metrics, every=600)
    upkeep = Upkeep(clock, [keeper])
    await upkeep.start()
    try:
        await clock.run_for(1800)
    finally:
        await upkeep.stop()
    assert store.calls == 3
    assert keeper.rebuilt == ["tasks_id_key"]
    assert metrics.registry.get_sample_value("workly_index_rebuilds_total") == 1


async def intervals(settings: Settings, autovacuum: bool = True) -> list[tuple[str, float]]:
    storage = await open_storage(settings.database_url or "")
    try:
        history = DeliveryHistory(storage.history, VirtualClock(), Rollup())
        made = maintainers(settings, VirtualClock(), Metrics(), storage, history, lambda: None)
        if not autovacuum:
            assert isinstance(made[-1], Vacuum)
            made[-1] = Vacuum(VacuumCounter(False), VacuumCounter(False), settings.vacuum_interval)
        return [(m.name, await m.interval()) for m in made]
    finally:
        await storage.close()


async def test_the_upkeep_jobs_and_their_intervals_follow_the_settings(sqlite_url: str) -> None:
    defaults = dict(await intervals(Settings(database_url=sqlite_url)))
    assert defaults == {
        "reap": 5.0, "prune": 60.0, "recount": 60.0, "breaker probes": 0.5, "queue depths": 15.0,
        "task counts": 2.0, "index rebuilds": 60.0, "delivery history": 5.0,
        "delivery history pruning": 60.0, "vacuum": 0, "audit pruning": 300.0,
    }  # fmt: skip
    changed = dict(
        await intervals(
            Settings(
                database_url=sqlite_url, reap_interval=0, retention=0, reindex_interval=0,
                breaker_cooldown=0.2, vacuum_interval=7, audit_retention=0,
            )
        )
    )  # fmt: skip
    assert (changed["reap"], changed["index rebuilds"], changed["audit pruning"]) == (0, 0, 0)
    assert changed["prune"] == 60.0  # a queue's or a tenant's own retention applies whatever the settings
    assert (changed["breaker probes"], changed["vacuum"]) == (0.2, 7)
    assert dict(await intervals(Settings(database_url=sqlite_url), autovacuum=False))["vacuum"] == 10.0
