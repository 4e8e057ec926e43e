"""The soak's stall watches (tools/soak/stalls.py): what a sleep says, as pure logic; then
each watch made to see a real stall (its process stopped with SIGSTOP, the event loop
blocked), timed where it happened; and the watch process's lifetime."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tools.soak.faults import STALL_DUPLICATES, Fault
from tools.soak.stalls import NOTED, REPO, TICK, StallWatch, stalls_of
from tools.soak.workload import LEASE_MARGIN, TIMEOUT


def test_a_sleep_shows_a_late_wake_and_a_wall_clock_that_jumped_apart() -> None:
    assert stalls_of(TICK, TICK) == []
    assert stalls_of(TICK + NOTED - 0.01, TICK + NOTED - 0.01) == []
    assert stalls_of(TICK + NOTED, TICK + NOTED) == [("watch", TICK + NOTED)]  # both clocks moved
    assert stalls_of(TICK, TICK + 12) == [("clock", 12)]  # the wall clock alone: stepped on
    assert stalls_of(3.0, 15.0) == [("watch", 3.0), ("clock", 12.0)]


@pytest.mark.parametrize(
    ("target", "seconds", "excuses"),
    [
        ("soak", TIMEOUT, True),
        ("soak", TIMEOUT - 0.1, False),
        ("clock", TIMEOUT + LEASE_MARGIN * 2 / 3, True),  # a lease less one heartbeat period
        ("clock", TIMEOUT, False),
        ("watch", 100.0, False),  # the watch process alone: nothing of Workly's stopped
    ],
)
def test_which_stalls_may_duplicate(target: str, seconds: float, excuses: bool) -> None:
    assert STALL_DUPLICATES["clock"] > STALL_DUPLICATES["soak"]
    assert Fault("stall", 0, target, began=1000.0, ended=1000.0 + seconds).may_duplicate is excuses


@pytest.fixture
async def watch() -> AsyncIterator[StallWatch]:
    watch = StallWatch()
    await watch.start(time.time())
    yield watch
    await watch.stop()


async def seen(watch: StallWatch, target: str) -> list[Fault]:
    for _ in range(200):
        if found := [s for s in watch.stalls if s.target == target]:
            return found
        await asyncio.sleep(0.05)
    return []


async def test_a_stopped_watch_process_reports_when_and_how_long(watch: StallWatch) -> None:
    pid = watch.watch_pid
    assert pid is not None
    stopped = time.time()
    os.kill(pid, signal.SIGSTOP)
    await asyncio.sleep(NOTED + 0.5)  # a stall, not a wait: how long the process stays stopped
    os.kill(pid, signal.SIGCONT)
    [stall] = await seen(watch, "watch")
    assert stall.began is not None and stall.ended is not None
    assert abs(stall.began - stopped) < TICK + 0.5  # the window is where the stop was
    assert NOTED + 0.5 <= stall.ended - stall.began < NOTED + 5
    assert not stall.may_duplicate
    assert not [s for s in watch.stalls if s.target == "clock"]  # both clocks moved alike


async def test_a_blocked_event_loop_is_a_soak_stall(watch: StallWatch) -> None:
    blocked = time.time()
    # a stall, not a wait: the receivers' loop blocked, as a collection would block it
    time.sleep(NOTED + 0.3)  # noqa: ASYNC251
    [stall] = await seen(watch, "soak")
    assert stall.began is not None and stall.ended is not None
    assert abs(stall.began - blocked) < TICK + 0.5
    assert NOTED + 0.3 <= stall.ended - stall.began < NOTED + 5


async def test_stop_ends_the_watch_process_and_may_be_called_again(watch: StallWatch) -> None:
    pid = watch.watch_pid
    assert pid is not None
    os.kill(pid, 0)  # running
    await watch.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    await watch.stop()
    assert watch.errors == []


async def test_a_watch_process_that_ends_early_is_an_error(watch: StallWatch) -> None:
    pid = watch.watch_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):
        if watch.errors:
            break
        await asyncio.sleep(0.05)
    assert watch.errors and "ended early" in watch.errors[0]


def test_the_watch_process_ends_when_its_parent_is_gone(tmp_path: Path) -> None:
    # A parent that starts the watch and exits at once, as a soak killed outright would.
    parent = subprocess.run(
        [sys.executable, "-c", "import os, subprocess, sys; p = subprocess.Popen([sys.executable, '-m',"
         " 'tools.soak.stalls', str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL);"
         " print(p.pid)"],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    pid = int(parent.stdout)
    status = Path(f"/proc/{pid}/status")
    for _ in range(300):
        if not status.exists() or "\nState:\tZ" in status.read_text():
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    pytest.fail("the watch process outlived its parent")
