"""The soak (tools/soak) for a minute, as CI runs it: the real CLI in separate processes,
real receivers, faults on a schedule, then the books. A clean run exits 0 and says so; its
report holds the samples, every planned fault with its time (and apart, any stall of the
machine or of the soak that tools/soak/stalls.py saw), and the plot.

PostgreSQL: three `workly serve` processes on a cluster of the soak's own (it restarts
it), with a kill -9, a SIGSTOP past the lease, a database restart and a receiver outage.
SQLite: one `workly dev`, killed and paused. No figure is asserted: the machine is shared;
the 30- and 10-minute runs in docs/reliability.md are where the figures come from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.soak.cluster import server_binary

pytestmark = [pytest.mark.e2e, pytest.mark.long]
REPO = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


def soak(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("WORKLY_")}
    return subprocess.run(
        [sys.executable, "-m", "tools.soak", "-out", str(out), "-sample-every", "5s", "-drain", "2m", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip


def check_report(out: Path, result: subprocess.CompletedProcess[str], faults: set[str]) -> dict[str, object]:
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "verdict: CLEAN" in result.stdout
    report = json.loads((out / "report.json").read_text())
    books = report["books"]
    assert books["violations"] == 0
    assert books["deliveries"] > 2000  # 30-60 s at 60/s and the bursts, fanned out
    assert books["by_state"].get("failed", 0) > 0  # the 410 and always-500 kinds ended failed
    # Every keyed request was checked against those of its key in flight (held 200 ms each).
    assert books["keyed_requests"] > 100 and books["max_key_in_flight"] >= 1
    assert "ordering keys:" in result.stdout
    assert {fault["kind"] for fault in report["faults"]} == faults  # the planned ones; stalls apart
    assert all(stall["kind"] == "stall" for stall in report["stalls"])
    assert all(fault["began_s"] is not None and not fault["error"] for fault in report["faults"])
    assert len(report["samples"]) >= 6
    assert (out / "soak.png").read_bytes().startswith(PNG)
    return report


@pytest.mark.postgres
@pytest.mark.timeout(420)
def test_a_minute_on_postgres_with_three_processes_and_every_fault(tmp_path: Path) -> None:
    if not (server_binary("initdb") and server_binary("pg_ctl")):
        # The soak restarts a cluster of its own: it needs the server binaries (CI has them).
        assert os.environ.get("CI", "").lower() != "true", "no PostgreSQL server binaries (initdb, pg_ctl)"
        pytest.skip("no PostgreSQL server binaries to start a cluster of the soak's own")
    result = soak(
        tmp_path, "-backend", "postgres", "-processes", "3", "-duration", "60s", "-rate", "60",
        "-fault-every", "12s", "-outage", "8s", "-retention", "20s", "-burst-every", "20s",
        "-burst-size", "100",
    )  # fmt: skip
    report = check_report(tmp_path, result, {"kill", "pause", "database", "outage"})
    assert set(report["samples"][-1]["rss_mib"]) == {"workly-0", "workly-1", "workly-2", "soak"}


def test_half_a_minute_on_sqlite_killed_and_paused(tmp_path: Path) -> None:
    result = soak(
        tmp_path, "-backend", "sqlite", "-duration", "30s", "-rate", "60", "-fault-every", "8s",
        "-outage", "5s", "-retention", "15s", "-burst-every", "10s", "-burst-size", "100",
    )  # fmt: skip
    check_report(tmp_path, result, {"kill", "pause", "outage"})
