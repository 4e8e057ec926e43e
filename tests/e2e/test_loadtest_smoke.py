"""A short run of the real load test against the real servers: nothing lost, nothing doubled.

This checks the tool and the delivery path under a little load; it asserts no rate or
latency (the machine is shared and noisy): throughput is measured by `just loadtest`
and recorded in docs/performance.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import WorklyServer
from tests.support.servers import TEST_TOKEN

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def test_a_short_load_test_loses_and_duplicates_nothing(workly_server: WorklyServer, tmp_path: Path) -> None:
    report = tmp_path / "loadtest.json"
    args = [
        "-url",
        workly_server.base_url,
        "-token",
        TEST_TOKEN,
        "-rate",
        "200",
        "-duration",
        "3s",
        "-warmup",
        "1s",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "tools.loadtest", *args, "-quiet", "-drain", "20s", "-json", str(report)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    numbers = json.loads(report.read_text())
    assert numbers["sent"] == 800  # 4 s at 200/s, warm-up included
    assert numbers["enqueue_errors"] == 0
    assert (numbers["delivered"], numbers["lost"], numbers["duplicates"]) == (800, 0, 0)
    assert "| 200/s |" in result.stdout
