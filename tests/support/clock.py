"""A clock the test moves by hand, so nothing sleeps to make time pass.

``VirtualClock`` is a ``workly.clock.Clock``: its wall clock and its monotonic clock stand
still until the test moves them (``advance``, ``set``). Sleeps, waits and timeouts taken
through it are due at virtual instants; moving the clock past one wakes its sleeper (in
deadline order), so a dispatcher's poll, a periodic job or a lease deadline can be made to
come on demand, and a wait of an hour costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta

START = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
# How many turns of the event loop ``run_for`` gives the woken sleepers at each step:
# enough for a job to run its in-memory part and sleep again.
_SETTLE_TURNS = 20


class VirtualClock:
    def __init__(self, start: datetime | None = None) -> None:
        self._wall = start or START
        self._mono = 1000.0  # any origin: only differences mean something
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    # --- reading --------------------------------------------------------------------
    def now(self) -> datetime:
        return self._wall

    def monotonic(self) -> float:
        return self._mono

    # --- moving -------------------------------------------------------------------
    def advance(self, seconds: float) -> datetime:
        """Move both clocks ``seconds`` on and wake every sleeper due by then; the new now."""
        if seconds < 0:
            raise ValueError("a monotonic clock does not go back: use set() for the wall clock")
        self._mono += seconds
        self._wall += timedelta(seconds=seconds)
        self._fire_due()
        return self._wall

    def set(self, wall: datetime) -> None:
        """Set the wall clock alone (as NTP would), forwards or back; sleepers are not woken."""
        self._wall = wall

    async def run_for(self, seconds: float) -> datetime:
        """Move the clocks ``seconds`` on a sleeper at a time: each is woken at its own instant
        and given a few turns of the event loop (to run and sleep again) before the next."""
        end = self._mono + seconds
        await _settle()  # what was just started goes to sleep first
        while self._due and self._due[0][0] <= end:
            self.advance(max(0.0, self._due[0][0] - self._mono))
            await _settle()
        return self.advance(end - self._mono)

    @property
    def next_due(self) -> float | None:
        """Seconds until the next sleeper is due (None: nobody sleeps)."""
        return None if not self._due else max(0.0, self._due[0][0] - self._mono)

    # --- waiting (the Clock protocol) ------------------------------------------------------
    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._at(self._mono + seconds, lambda: woken.done() or woken.set_result(None))
        await woken

    def timeout_at(self, deadline: float | None) -> AbstractAsyncContextManager[None]:
        return self._timeout_at(deadline)

    @contextlib.asynccontextmanager
    async def _timeout_at(self, deadline: float | None) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        inside = True

        def expire() -> None:
            if inside and not timeout.expired():
                timeout.reschedule(loop.time())  # due now: asyncio cancels the block and says so

        async with asyncio.timeout(None) as timeout:
            try:
                if deadline is not None:
                    if deadline <= self._mono:
                        expire()
                    else:
                        self._at(deadline, expire)
                yield
            finally:
                inside = False

    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        with contextlib.suppress(TimeoutError):
            async with self.timeout_at(self._mono + seconds):
                await event.wait()
        return event.is_set()

    def _at(self, deadline: float, wake: Callable[[], None]) -> None:
        heapq.heappush(self._due, (deadline, next(self._order), wake))

    def _fire_due(self) -> None:
        while self._due and self._due[0][0] <= self._mono:
            _, _, wake = heapq.heappop(self._due)
            wake()


async def _settle() -> None:
    for _ in range(_SETTLE_TURNS):
        await asyncio.sleep(0)
