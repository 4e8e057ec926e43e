"""What a periodic upkeep job is, and the runner that starts and stops them together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Protocol

from workly.clock import Clock
from workly.periodic import run_every

log = logging.getLogger("workly.housekeeping")


class Maintainer(Protocol):
    """One periodic job: a failed run is logged and the next comes on schedule."""

    @property
    def name(self) -> str: ...

    async def interval(self) -> float:
        """Seconds between runs, decided when upkeep starts (vacuum asks the database);
        0: this job does not run in this process."""

    async def run(self) -> None: ...


class Upkeep:
    """Runs each maintainer every its interval (first after one interval) until stopped."""

    def __init__(self, clock: Clock, maintainers: Sequence[Maintainer]) -> None:
        self._clock = clock
        self.maintainers = tuple(maintainers)
        self._loops: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Every interval first (one may ask the database, and fail): nothing runs unless
        all could be decided."""
        intervals = [await maintainer.interval() for maintainer in self.maintainers]
        for maintainer, seconds in zip(self.maintainers, intervals, strict=True):
            if seconds > 0:
                self._loops.append(run_every(self._clock, seconds, maintainer.run, maintainer.name, log))

    async def stop(self) -> None:
        loops, self._loops = self._loops, []
        for loop in loops:
            loop.cancel()
        for loop in loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
