"""SQLite's plans for the statements every enqueue runs: index searches, never a read of
a queue's every task (EXPLAIN QUERY PLAN on a migrated database with tasks in it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.storage.helpers import new
from tests.support.clock import VirtualClock
from workly.json_text import to_json
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite import SqliteStorage


async def test_an_idempotency_lookup_searches_the_idempotency_index(
    tmp_path: Path, clock: VirtualClock
) -> None:
    path = tmp_path / "plan.db"
    storage = await SqliteStorage.open(f"sqlite:///{path}")
    try:
        await storage.database.migrate()
        await storage.tasks.enqueue([new(idempotency_key=f"k{n}") for n in range(200)], clock.now())
    finally:
        await storage.close()
    query = sqlite_queries().get_tasks_by_idempotency_keys
    with sqlite3.connect(path) as db:
        db.execute("ANALYZE")
        plan = db.execute(
            f"EXPLAIN QUERY PLAN {query.sql}", {"keys": to_json([["q", "k1"], ["q", "k2"]])}
        ).fetchall()
    details = [row[-1] for row in plan]
    assert any("USING INDEX tasks_idempotency (queue=? AND idempotency_key=?)" in d for d in details), details
    assert not any(d.startswith("SCAN t") or "tasks_queue_seq" in d for d in details), details
