"""Stalls the soak did not cause on purpose, seen as they happen.

Two watches, each a short sleep in a loop that notes when it woke late:

- the soak's own event loop, which runs the receivers (target ``soak``): while it is
  stalled the receivers read nothing. A request Workly gave up on meanwhile (its attempt
  timed out) is still answered 2xx when the loop runs again, and Workly's retry is answered
  too. The machine stopping as a whole (its host stealing the CPU for seconds) shows here too.
- a small process of its own (the watch), which compares the monotonic clock with the wall
  clock on every wake. Leases expire by the wall clock (``datetime.now`` in every process):
  when it jumps on by more than the monotonic clock (a virtual machine resumed and its clock
  stepped), every lease aged at once (target ``clock``), and the reapers take back tasks
  whose processes are alive. The watch waking late on its own (target ``watch``) is only
  that process starved or stopped: reported, never an excuse.

A stall long enough to make a delivery count twice (faults.Fault.may_duplicate) excuses
duplicates within its window as a planned fault does; the books count those apart.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

from tools.soak.faults import Fault

TICK = 0.1  # seconds between the watches' wakes
NOTED = 1.0  # a wake this much late, or a wall clock this much ahead, is a stall
REPO = Path(__file__).resolve().parents[2]


def stalls_of(slept: float, jumped: float) -> list[tuple[str, float]]:
    """What one of the watch process's sleeps of TICK says: ``slept`` seconds by the monotonic
    clock, ``jumped`` by the wall clock. (target, seconds) for each stall it shows."""
    found: list[tuple[str, float]] = []
    if slept - TICK >= NOTED:
        found.append(("watch", slept))
    if jumped - slept >= NOTED:
        found.append(("clock", jumped - slept))
    return found


def watch(parent: int) -> None:
    """The watch process: prints "ready", then "<target> <woke at, time.time()> <seconds>"
    per stall; ends when ``parent`` is no longer its parent (a soak killed outright leaves
    no watch behind; passed in, as the parent may be gone before this one starts)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the soak stops it; ^C is the soak's
    mono, wall = time.monotonic(), time.time()
    print("ready", flush=True)  # from here on, every instant is within a reading
    while os.getppid() == parent:
        time.sleep(TICK)
        # From the last reading, not from the sleep's start: a stop may come at any instant.
        slept, jumped = time.monotonic() - mono, time.time() - wall
        mono, wall = mono + slept, wall + jumped
        for target, seconds in stalls_of(slept, jumped):
            print(f"{target} {wall:.3f} {seconds:.3f}", flush=True)


class StallWatch:
    """Both watches, from ``start`` to ``stop``; ``stalls`` are what they saw, in time order."""

    def __init__(self) -> None:
        self.stalls: list[Fault] = []
        self.errors: list[str] = []  # a watch that ended before stop: its silence means nothing
        self._began = 0.0
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._loop_watch: asyncio.Task[None] | None = None

    @property
    def watch_pid(self) -> int | None:
        """The watch process (tests stop it to make a stall)."""
        return self._process.pid if self._process is not None else None

    async def start(self, began: float) -> None:
        """``began``: the soak's start (time.time()), which stalls are timed from."""
        self._began = began
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tools.soak.stalls", str(os.getpid()), stdout=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL, cwd=REPO,
        )  # fmt: skip
        assert self._process.stdout is not None
        async with asyncio.timeout(30):
            await self._process.stdout.readline()  # "ready": its clock is running
        self._reader = asyncio.create_task(self._read(self._process))
        self._loop_watch = asyncio.create_task(self._watch_loop())

    async def stop(self) -> None:
        """End both watches; a stall the watch process reported before it ended is kept."""
        if self._loop_watch is not None:
            self._loop_watch.cancel()
            await asyncio.gather(self._loop_watch, return_exceptions=True)
        process, self._process = self._process, None
        if process is not None:
            if process.returncode is None:
                process.kill()
            await process.wait()
        if self._reader is not None:  # reads what the watch wrote up to its end, then ends
            try:
                async with asyncio.timeout(5):
                    await self._reader
            except TimeoutError:
                self._reader.cancel()
            except Exception as exc:
                self.errors.append(f"reading the stall watch failed: {type(exc).__name__}: {exc}")
            self._reader = None
        self.stalls.sort(key=lambda stall: stall.began or 0.0)

    def note(self, target: str, woke: float, seconds: float) -> None:
        began = woke - seconds
        self.stalls.append(Fault("stall", began - self._began, target, began=began, ended=woke))
        print(f"soak: stall: {target} {seconds:.1f}s at {began - self._began:.1f}s", flush=True)

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            target, woke, seconds = line.decode().split()
            self.note(target, float(woke), float(seconds))
        if self._process is process:  # ended before stop() ended it
            self.errors.append(f"the stall watch ended early (exit {await process.wait()})")

    async def _watch_loop(self) -> None:
        before = time.monotonic()
        while True:
            await asyncio.sleep(TICK)
            slept, before = time.monotonic() - before, time.monotonic()
            if slept - TICK >= NOTED:
                self.note("soak", time.time(), slept)


if __name__ == "__main__":
    watch(int(sys.argv[1]))
