"""The injectable clock: everything that reads the time, waits for it to pass, or bounds a
wait by it takes a ``Clock``.

Two readings: ``now()`` is the wall clock (what is stored: run_at, lease expiry, fire
times; comparable across processes), ``monotonic()`` the process's own seconds (intervals,
deadlines, how long ago: never jumps with NTP). Waiting goes through the same object, so a
test that moves a virtual clock (tests/support/clock.py) fires the sleeps, polls and
timeouts of the dispatcher, the periodic jobs, the scheduler and the wake-ups without
waiting for real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The wall clock, in UTC."""

    def monotonic(self) -> float:
        """Seconds on a clock that only moves forward; deadlines below are on it."""

    async def sleep(self, seconds: float) -> None:
        """Return after ``seconds`` (at once, after letting others run, for 0 or less)."""

    def timeout_at(self, deadline: float | None) -> AbstractAsyncContextManager[object]:
        """Cancel the block at ``deadline`` (``monotonic()`` seconds; None: never) and raise
        TimeoutError out of it, as ``asyncio.timeout_at`` does."""

    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        """Wait until ``event`` is set or ``seconds`` have passed; whether it was set."""


class SystemClock:
    """Real time: the wall clock in UTC, ``time.monotonic``, asyncio's sleeps and timeouts."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def timeout_at(self, deadline: float | None) -> AbstractAsyncContextManager[object]:
        # Relative to time.monotonic, not to the loop's clock: uvloop's may be a cached reading.
        return asyncio.timeout(None if deadline is None else deadline - time.monotonic())

    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()
        return event.is_set()
