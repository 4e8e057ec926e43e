"""The soak's stall watches (tools/soak/stalls.py), each made to see a real stall: its watch
process stopped with SIGSTOP, its event loop blocked."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator

import pytest

from tools.soak.stalls import NOTED, StallWatch


@pytest.fixture
async def watch() -> AsyncIterator[StallWatch]:
    watch = StallWatch()
    await watch.start(time.time())
    yield watch
    await watch.stop()


async def seen(watch: StallWatch, target: str) -> list[float]:
    for _ in range(100):
        lengths = [(s.ended or 0) - (s.began or 0) for s in watch.stalls if s.target == target]
        if lengths:
            return lengths
        await asyncio.sleep(0.05)
    return []


async def test_a_stopped_machine_watch_reports_how_long_it_was_stopped(watch: StallWatch) -> None:
    pid = watch.machine_pid
    assert pid is not None
    await asyncio.sleep(0.3)  # the watch's first sleep has begun
    os.kill(pid, signal.SIGSTOP)
    await asyncio.sleep(NOTED + 0.5)
    os.kill(pid, signal.SIGCONT)
    lengths = await seen(watch, "machine")
    assert len(lengths) == 1 and NOTED <= lengths[0] < NOTED + 1.5
    assert not watch.stalls[0].may_duplicate  # shorter than an attempt's timeout


async def test_a_blocked_event_loop_is_a_soak_stall(watch: StallWatch) -> None:
    await asyncio.sleep(0.3)
    time.sleep(NOTED + 0.3)  # noqa: ASYNC251 - the point: the receivers' loop blocked, as a collection would
    lengths = await seen(watch, "soak")
    assert len(lengths) == 1 and NOTED <= lengths[0] < NOTED + 1.0


async def test_stop_ends_the_watch_process(watch: StallWatch) -> None:
    pid = watch.machine_pid
    assert pid is not None
    os.kill(pid, 0)  # running
    await watch.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
