"""tools/bench/statement_costs.py, run as a user runs it: against a scratch database, it
prints the planning and execution time of each hot statement, and leaves no task behind."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import asyncpg
import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]
ROOT = Path(__file__).resolve().parents[2]


async def test_it_prints_each_statements_costs_and_rolls_them_back(pg_fresh_db: str) -> None:
    tool = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tools.bench.statement_costs", pg_fresh_db, "-runs", "3",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(120):
        out, err = await tool.communicate()
    assert tool.returncode == 0, err.decode()
    printed = out.decode()
    # planning, execution, a prepared call (plan_cache_mode auto), one with a generic plan
    rows = {
        match.group(1): [float(ms) for ms in match.group(2).split()]
        for match in re.finditer(r"^(\w+)((?:\s+[0-9.]+){4})$", printed, re.M)
    }
    assert set(rows) == {"claim_tasks", "enqueue_tasks", "enqueue_tasks_leasing"}, printed
    assert all(ms > 0 for times in rows.values() for ms in times), printed
    conn = await asyncpg.connect(pg_fresh_db)
    try:  # only the 8 tasks it enqueued first: every measured call was rolled back
        assert await conn.fetchval("SELECT count(*) FROM tasks") == 8
        assert await conn.fetchval("SELECT count(*) FROM tasks WHERE status = 'ready'") == 8
    finally:
        await conn.close()
