"""Short runs of the real load test, `workly loadtest`, against the real servers: nothing lost,
nothing doubled, its queue gone afterwards (unless --keep), the server and the token taken
from WORKLY_SERVER and WORKLY_TOKEN.

This checks the tool and the delivery path under a little load; it asserts no rate or
latency (the machine is shared and noisy): throughput is measured by `workly loadtest`
and recorded in docs/performance.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import WorklyServer
from tests.support.servers import AUTH, TEST_TOKEN

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def loadtest(
    workly_server: WorklyServer, *args: str, tool: tuple[str, ...] = ("-m", "workly", "loadtest")
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKLY_SERVER": workly_server.base_url, "WORKLY_TOKEN": TEST_TOKEN}
    return subprocess.run(
        [sys.executable, *tool, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def queues(workly_server: WorklyServer) -> list[str]:
    listed = httpx.get(workly_server.base_url + "/v1/queues", headers=AUTH).json()["queues"]
    return [queue["name"] for queue in listed]


def test_a_short_load_test_loses_and_duplicates_nothing(workly_server: WorklyServer, tmp_path: Path) -> None:
    report = tmp_path / "loadtest.json"
    run = ["--rate", "200", "--duration", "3s", "--warmup", "1s", "--quiet", "--drain", "20s"]
    result = loadtest(workly_server, *run, "--json", str(report))
    assert result.returncode == 0, result.stdout + result.stderr
    numbers = json.loads(report.read_text())
    assert numbers["sent"] == 800  # 4 s at 200/s, warm-up included
    assert numbers["enqueue_errors"] == 0
    assert (numbers["delivered"], numbers["lost"], numbers["duplicates"]) == (800, 0, 0)
    # The rate asked for (on a machine too busy to keep the pace, with what was sent beside it).
    assert "| 200/s " in result.stdout
    assert "loadtest" not in queues(workly_server)  # it cleaned up after itself


def test_keep_and_the_benchmarks_single_dash_form(dev_server_with_tokens: WorklyServer) -> None:
    server = dev_server_with_tokens
    kept = loadtest(server, "--rate", "50", "--duration", "1s", "--warmup", "0s", "--quiet", "--keep")
    assert kept.returncode == 0 and "queue loadtest kept" in kept.stdout, kept.stdout + kept.stderr
    assert "loadtest" in queues(server)
    again = loadtest(server, "--rate", "50", "--duration", "1s", "--warmup", "0s", "--quiet")
    assert again.returncode == 1 and "queue loadtest exists" in again.stderr, again.stdout + again.stderr
    assert "workly queue-delete loadtest --yes" in again.stderr
    assert "loadtest" in queues(server)  # a queue it did not make is never deleted
    assert httpx.delete(server.base_url + "/v1/queues/loadtest", headers=AUTH).status_code == 204
    old_form = ["-url", server.base_url, "-token", TEST_TOKEN, "-rate", "50", "-duration", "1s", "-quiet"]
    legacy = loadtest(server, *old_form, tool=("-m", "tools.loadtest"))
    assert legacy.returncode == 0, legacy.stdout + legacy.stderr
    assert "loadtest" not in queues(server)


def test_a_wrong_token_is_one_line_that_says_so(dev_server_with_tokens: WorklyServer) -> None:
    env = {**os.environ, "WORKLY_SERVER": dev_server_with_tokens.base_url, "WORKLY_TOKEN": "wrong"}
    result = subprocess.run(
        [sys.executable, "-m", "workly", "loadtest", "--duration", "1s"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "give the token (--token or WORKLY_TOKEN)" in result.stderr and "Traceback" not in result.stderr


def test_an_interrupted_load_test_deletes_its_queue(dev_server_with_tokens: WorklyServer) -> None:
    server = dev_server_with_tokens
    env = {**os.environ, "WORKLY_SERVER": server.base_url, "WORKLY_TOKEN": TEST_TOKEN}
    run = subprocess.Popen(
        [sys.executable, "-m", "workly", "loadtest", "--rate", "100", "--duration", "60s", "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Ctrl-C's signal, whatever the shell that started the tests ignores.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while "loadtest" not in queues(server):
            assert time.monotonic() < deadline and run.poll() is None, "the load test never made its queue"
            time.sleep(0.05)
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130 and "interrupted: queue loadtest deleted" in stderr, stderr
    assert "Traceback" not in stderr
    assert "loadtest" not in queues(server)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--queue", "x/../../v1"], "is not a queue name"),
        (["--duration", "0s"], "under one task"),
        (["--json", "/no/such/dir/out.json"], "no directory /no/such/dir"),
    ],
)
def test_options_that_cannot_work_are_one_line_before_anything_runs(
    tmp_path: Path, args: list[str], said: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "workly", "loadtest", "--server", "http://127.0.0.1:9", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
