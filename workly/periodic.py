"""Background jobs that run every so many seconds and outlive their own failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from workly.batching import CoalescedCall
from workly.clock import Clock


def run_every(
    clock: Clock, interval: float, job: Callable[[], Awaitable[None]], name: str, log: logging.Logger
) -> asyncio.Task[None]:
    """Start ``job`` every ``interval`` seconds of ``clock`` (first after one interval); a
    failure is logged and the next run comes on schedule. Cancel the returned task to stop it."""

    async def loop() -> None:
        while True:
            await clock.sleep(interval)
            try:
                await job()
            except Exception as exc:
                log.warning("%s failed (retrying in %gs): %s", name, interval, exc)

    return asyncio.create_task(loop(), name=f"workly-{name}")


class WokenJob:
    """A job that runs when woken and at least every ``interval`` seconds, never twice at once
    (a wake during a run folds into one more run), and not at all once stopped.

    For background work whose trigger may be missed (a wake in another process, a crash):
    the wake makes it prompt, the interval makes it sure."""

    def __init__(
        self,
        clock: Clock,
        job: Callable[[], Awaitable[None]],
        interval: float,
        name: str,
        log: logging.Logger,
    ) -> None:
        self._clock = clock
        self._interval = interval
        self._name = name
        self._log = log
        self._call = CoalescedCall(job, self._failed)
        self._ticker: asyncio.Task[None] | None = None
        self._stopped = False

    def start(self) -> None:
        self._ticker = run_every(self._clock, self._interval, self._tick, self._name, self._log)

    def wake(self) -> None:
        if not self._stopped:
            self._call.trigger()

    @property
    def stopped(self) -> bool:
        return self._stopped

    async def stop(self) -> None:
        """No new runs; the one in flight finishes."""
        self._stopped = True
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
        await self._call.drain()

    async def _tick(self) -> None:
        self.wake()

    def _failed(self, exc: Exception) -> None:
        self._log.warning("%s failed (it runs again within %gs): %s", self._name, self._interval, exc)
