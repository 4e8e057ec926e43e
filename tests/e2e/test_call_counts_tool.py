"""tools/bench/call_counts.py: the profile of a window under load, as calls per delivered task.

One short run against a real `workly dev` it starts itself (the tool's own child process,
profiled from its start), and the arithmetic that turns two snapshots into the window's
counts. No count is asserted beyond sanity: the figures are recorded in docs/performance.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.bench.call_counts import Stats, _add, _subtract, layer_of

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
F = ("/x/workly/dispatch/deliverer.py", 84, "_attempt")
G = ("/x/site-packages/uvicorn/protocols/http/h.py", 461, "send")


def test_a_short_run_counts_the_window_by_layer() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tools.bench.call_counts", "-rate", "100", "-window", "1",
         "-warmup", "1", "-settle", "0.5", "-top", "40", "-callers", "enqueue_one"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r"(\d+) tasks delivered in the window: (\d+) calls per task", result.stdout)
    assert found, result.stdout
    tasks, calls = int(found[1]), int(found[2])
    # About one second at 100/s; under the profiler on a loaded machine (the suite's other
    # workers) the generator falls behind: 34 were seen in CI. Only an empty or runaway
    # window is wrong (a generator that fell behind catches up inside the window: 202 seen).
    assert 10 <= tasks <= 500
    assert 100 < calls < 10_000  # an enqueue, a delivery and their bookkeeping: hundreds of calls
    for layer in ("| workly/api |", "| workly/dispatch |", "| uvicorn |"):
        assert layer in result.stdout
    assert "getstats" not in result.stdout  # the snapshots' own work is left out
    # Every enqueue runs through the fast path (FastEnqueue.__call__): enqueue_one's caller.
    callers = result.stdout.split(" enqueue_one: ", 1)[1].splitlines()
    assert callers[1].strip().startswith("workly/api:") and callers[1].strip().split()[1] == "__call__:"


def test_the_window_is_the_second_snapshot_less_the_first() -> None:
    before: Stats = {F: (2, 2, 1.0, 1.5, {G: (2, 2, 1.0, 1.5)})}
    after: Stats = {F: (5, 5, 2.5, 3.0, {G: (5, 5, 2.5, 3.0)}), G: (1, 1, 0.5, 0.5, {})}
    window = _subtract(after, before)
    assert window == {F: (3, 3, 1.5, 1.5, {G: (3, 3, 1.5, 1.5)}), G: (1, 1, 0.5, 0.5, {})}
    assert _subtract(before, before) == {}  # nothing called in between: nothing counted


def test_threads_add_up_per_function_and_caller() -> None:
    total: Stats = {}
    _add(total, {F: (1, 1, 1.0, 1.0, {G: (1, 1, 1.0, 1.0)})})
    _add(total, {F: (2, 2, 0.5, 0.5, {G: (2, 2, 0.5, 0.5)}), G: (1, 1, 0.1, 0.1, {})})
    assert total == {F: (3, 3, 1.5, 1.5, {G: (3, 3, 1.5, 1.5)}), G: (1, 1, 0.1, 0.1, {})}


@pytest.mark.parametrize(
    ("filename", "function", "layer"),
    [
        (F[0], F[2], "workly/dispatch"),
        ("/x/workly/ids.py", "new_task_id", "workly/ids"),
        (G[0], G[2], "uvicorn"),
        ("~", "<method 'execute' of 'sqlite3.Connection' objects>", "C: sqlite3.Connection"),
        ("/usr/lib/python3.11/asyncio/tasks.py", "create_task", "stdlib: tasks"),
    ],
)
def test_entries_fall_into_their_layer(filename: str, function: str, layer: str) -> None:
    assert layer_of(filename, function) == layer
