"""The drain benchmark and the latency breakdown (tools/bench), run as their own processes
against the real servers, briefly: every task arrives once, every stage is measured, their
queue is gone afterwards, and a queue of the same name that exists is left as it was.

No rate or latency is asserted (the machine is shared): the figures are measured by these
tools and recorded in docs/performance.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import WorklyServer
from tests.support.servers import AUTH, TEST_TOKEN

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def bench(workly_server: WorklyServer, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"tools.bench.{tool}", workly_server.base_url, "-token", TEST_TOKEN, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def queue_status(workly_server: WorklyServer, name: str) -> int:
    return httpx.get(f"{workly_server.base_url}/v1/queues/{name}", headers=AUTH).status_code


def test_the_drain_delivers_every_task_once(workly_server: WorklyServer, tmp_path: Path) -> None:
    out = tmp_path / "drain.json"
    result = bench(workly_server, "drain", "-tasks", "2000", "-hop", "0.3", "-json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    numbers = json.loads(out.read_text())
    assert (numbers["tasks"], numbers["arrived"], numbers["duplicates"]) == (2000, 2000, 0)
    assert numbers["drain_per_second"] > 0 and numbers["hop_aiohttp_per_second"] > 0
    assert queue_status(workly_server, "drain-bench") == 404


def test_the_breakdown_measures_every_stage(workly_server: WorklyServer, tmp_path: Path) -> None:
    out = tmp_path / "breakdown.json"
    result = bench(workly_server, "latency_breakdown", "-rate", "100", "-duration", "2", "-json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 enqueues refused; 0 tasks not delivered" in result.stdout
    table = json.loads(out.read_text())
    assert table.keys() == {"request", "commit + answer", "commit + wake + claim", "sign + send", "total"}
    # Each task's stages lie inside its total: the median of the total is the largest.
    assert all(table["total"]["p50"] >= row["p50"] for row in table.values())
    assert queue_status(workly_server, "latency-breakdown") == 404


@pytest.mark.parametrize(
    ("tool", "queue"), [("drain", "drain-bench"), ("latency_breakdown", "latency-breakdown")]
)
def test_a_queue_of_the_same_name_is_left_as_it_was(
    workly_server: WorklyServer, tool: str, queue: str
) -> None:
    url = f"{workly_server.base_url}/v1/queues/{queue}"
    made = httpx.put(url, headers=AUTH, json={"max_concurrency": 7, "paused": True})
    assert made.status_code == 201, made.text
    result = bench(workly_server, tool, "-hop", "0.1") if tool == "drain" else bench(workly_server, tool)
    assert result.returncode != 0
    assert f"queue {queue} exists" in result.stdout + result.stderr
    kept = httpx.get(url, headers=AUTH).json()
    assert (kept["max_concurrency"], kept["paused"]) == (7, True)
