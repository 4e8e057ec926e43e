"""Stalls the soak did not cause on purpose, seen as they happen.

Two watches, each a short sleep in a loop that notes when it woke late:

- ``machine``: a small process of its own. When it wakes seconds late, every process on
  the machine was stopped (a virtual machine paused by its host, the kernel stalled): Workly
  and PostgreSQL as much as a SIGSTOP stops one process, and the clock jumped on. Leases
  expire by that clock, so a stall longer than a lease is a pause of every process at once.
- ``soak``: the soak's own event loop, which runs the receivers. While it is stalled the
  receivers read nothing; a request that Workly gave up on meanwhile (its timeout ran out)
  is still answered 2xx when the loop runs again, and Workly's retry is answered too.

Either can make a delivery count twice with no fault of Workly's or of the soak's plan, so a
stall is a fault in the books: reported, and when long enough to cause a duplicate
(faults.STALL_DUPLICATES) excusing those within its window as a planned fault's do.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

from tools.soak.faults import Fault

TICK = 0.1  # seconds between the watches' wakes
NOTED = 1.0  # a wake this much late is a stall, reported

# The machine's watch: prints "<woke at, time.time()> <seconds late>" for each stall.
_WATCH = f"""
import sys, time
while True:
    before = time.monotonic()
    time.sleep({TICK})
    late = time.monotonic() - before - {TICK}
    if late >= {NOTED}:
        print(f"{{time.time():.3f}} {{late:.3f}}", flush=True)
"""


class StallWatch:
    """Both watches, from ``start`` to ``stop``; ``stalls`` are what they saw, as faults."""

    def __init__(self) -> None:
        self.stalls: list[Fault] = []
        self._process: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, began: float) -> None:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WATCH, stdout=asyncio.subprocess.PIPE
        )
        self._tasks = [
            asyncio.create_task(self._read_machine(self._process, began)),
            asyncio.create_task(self._watch_loop(began)),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()

    @property
    def machine_pid(self) -> int | None:
        """The machine watch's process (tests stop it to make a stall)."""
        return self._process.pid if self._process is not None else None

    def note(self, target: str, woke: float, late: float, began: float) -> None:
        stall = Fault("stall", woke - late - began, target, began=woke - late, ended=woke)
        self.stalls.append(stall)
        print(f"soak: {target} stalled for {late:.1f}s at {stall.at:.1f}s", flush=True)

    async def _read_machine(self, process: asyncio.subprocess.Process, began: float) -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            woke, late = (float(part) for part in line.split())
            self.note("machine", woke, late, began)

    async def _watch_loop(self, began: float) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(TICK)
            late = time.monotonic() - before - TICK
            if late >= NOTED:
                self.note("soak", time.time(), late, began)
