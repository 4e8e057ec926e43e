"""WokenJob: runs when woken and on its interval, never twice at once, not after stop."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.support.clock import VirtualClock
from workly.periodic import WokenJob

log = logging.getLogger("test.woken")


async def test_a_wake_runs_the_job_and_wakes_during_a_run_fold_into_one_more() -> None:
    runs = 0
    release = asyncio.Event()

    async def job() -> None:
        nonlocal runs
        runs += 1
        await release.wait()

    woken = WokenJob(VirtualClock(), job, interval=3600, name="job", log=log)
    woken.wake()
    await asyncio.sleep(0)
    for _ in range(5):
        woken.wake()  # while the first run is in flight
    release.set()
    await woken.stop()
    assert runs == 2


async def test_the_interval_runs_it_without_a_wake(caplog: pytest.LogCaptureFixture) -> None:
    ran = asyncio.Event()
    calls = 0

    async def job() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the database is away")
        ran.set()

    clock = VirtualClock()
    woken = WokenJob(clock, job, interval=60, name="job", log=log)
    woken.start()
    await clock.run_for(60)
    assert calls == 1 and not ran.is_set()  # the first tick: the job failed
    await clock.run_for(60)
    await asyncio.wait_for(ran.wait(), 10)  # the failure was logged, and the next tick ran it
    await woken.stop()
    assert "job failed" in caplog.text and "the database is away" in caplog.text


async def test_nothing_runs_once_stopped() -> None:
    calls = 0

    async def job() -> None:
        nonlocal calls
        calls += 1

    clock = VirtualClock()
    woken = WokenJob(clock, job, interval=60, name="job", log=log)
    woken.start()
    await woken.stop()
    woken.wake()
    await clock.run_for(600)  # ten intervals
    assert woken.stopped and calls == 0
