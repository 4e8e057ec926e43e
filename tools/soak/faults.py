"""The faults, on a schedule, and the time each one was in force.

- ``kill``: SIGKILL a random Workly process, start it again a second later.
- ``pause``: SIGSTOP a random Workly process for longer than a lease (timeout + margin),
  then SIGCONT: the others' reapers take its tasks back, its stale results are refused.
- ``database``: restart PostgreSQL, by turns ``fast`` (clean) and ``immediate`` (a crash:
  recovery from the WAL on start).
- ``outage``: the ``outage`` receiver's origin goes down (its socket closed) for minutes.
- ``stall``: not planned but seen (tools/soak/stalls.py): the machine, or the soak's own
  event loop that runs the receivers, stopped for a while.

A fault's window is from when it began to when it was over (the process ready again, the
process continued, the database accepting connections, the receiver listening): the books
excuse a duplicate only when its first 2xx fell within a few seconds of a window.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

from tools.soak.cluster import Cluster
from tools.soak.fleet import Fleet, Member
from tools.soak.receiver import Receiver
from tools.soak.workload import LEASE_MARGIN, TIMEOUT, Workload

SLACK = 5.0  # seconds either side of a fault's window in which its consequences may show
# The shortest stalls (tools/soak/stalls.py) that can make a delivery count twice. The soak's
# event loop (its receivers) stalled for an attempt's timeout: Workly gave up on a request the
# receiver answers 2xx later. The wall clock ahead of the monotonic one by a lease less one
# heartbeat period: a live process's leases expired (the soak's leases are short, run.py).
STALL_DUPLICATES = {"soak": TIMEOUT, "clock": TIMEOUT + LEASE_MARGIN * 2 / 3}


@dataclass
class Fault:
    kind: str
    at: float  # planned (or, for a stall, seen), seconds after the soak began
    target: str = ""
    began: float | None = None  # time.time()
    ended: float | None = None
    error: str | None = None  # the fault could not be undone (a process that did not come back)

    @property
    def may_duplicate(self) -> bool:
        """Whether this fault can make Workly send a delivery twice: a process killed, paused
        or cut off from its database between a request and its record; a stall of the soak's
        loop or of the clock long enough (STALL_DUPLICATES). A receiver that is down answers
        nothing: nothing it takes twice."""
        if self.kind == "stall":  # the watch process stalled alone: nothing of Workly's did
            shortest = STALL_DUPLICATES.get(self.target)
            return shortest is not None and (self.ended or 0.0) - (self.began or 0.0) >= shortest
        return self.kind in ("kill", "pause", "database")

    def covers(self, moment: float) -> bool:
        if self.began is None:
            return False
        return self.began - SLACK <= moment <= (self.ended or time.time()) + SLACK


def plan(duration: float, every: float, kinds: list[str], outage: float) -> list[Fault]:
    """Faults every ``every`` seconds by turns of ``kinds``, from ``every / 2`` on, none
    starting in the last fifth of the run; one outage of ``outage`` seconds from a quarter in."""
    faults: list[Fault] = []
    at, turn = every / 2, 0
    while kinds and at < duration * 0.8:
        faults.append(Fault(kinds[turn % len(kinds)], at))
        at, turn = at + every, turn + 1
    if outage > 0:
        faults.append(Fault("outage", duration / 4))
    return sorted(faults, key=lambda fault: fault.at)


@dataclass
class Injector:
    fleet: Fleet
    workload: Workload
    outage_receiver: Receiver
    cluster: Cluster | None
    pause_seconds: float
    outage_seconds: float
    seed: int = 1

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self._crash = False  # database restarts alternate fast and immediate
        self._beside: set[asyncio.Task[None]] = set()
        self.refresh_bases()

    def refresh_bases(self) -> None:
        self.workload.bases = [member.base_url for member in self.fleet.live()]

    async def run(self, faults: list[Fault], began: float) -> None:
        """Each fault at its time (monotonic ``began`` + at), one after another."""
        for fault in faults:
            wait = began + fault.at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if fault.kind == "outage":  # lasts minutes: runs beside the others
                task = asyncio.get_running_loop().create_task(self._inject(fault))
                self._beside.add(task)
                task.add_done_callback(self._beside.discard)
            else:
                await self._inject(fault)

    async def _inject(self, fault: Fault) -> None:
        fault.began = time.time()
        print(f"soak: fault {fault.kind} begins", flush=True)
        try:
            if fault.kind == "kill":
                await self._kill(fault, self._pick())
            elif fault.kind == "pause":
                await self._pause(fault, self._pick())
            elif fault.kind == "database":
                await self._restart_database(fault)
            elif fault.kind == "outage":
                fault.target = "outage receiver"
                await self.outage_receiver.stop()
                await asyncio.sleep(self.outage_seconds)
                await self.outage_receiver.start()
        except Exception as exc:  # recorded: the books count it as a violation
            fault.error = f"{type(exc).__name__}: {exc}"
            print(f"soak: fault {fault.kind} {fault.target} failed: {fault.error}", flush=True)
        finally:
            fault.ended = time.time()
        print(
            f"soak: fault {fault.kind} {fault.target} over after {fault.ended - fault.began:.1f}s", flush=True
        )

    def _pick(self) -> Member:
        return self._random.choice(self.fleet.live() or self.fleet.members)

    async def _kill(self, fault: Fault, member: Member) -> None:
        fault.target = f"workly-{member.index} (pid {member.pid})"
        self.workload.bases = [b for b in self.workload.bases if b != member.base_url]
        self.fleet.kill(member)
        await asyncio.sleep(1)
        self.fleet.start(member)
        await self.fleet.wait_ready(member)
        self.refresh_bases()

    async def _pause(self, fault: Fault, member: Member) -> None:
        fault.target = f"workly-{member.index} (pid {member.pid})"
        self.workload.bases = [b for b in self.workload.bases if b != member.base_url]
        self.fleet.pause(member)
        await asyncio.sleep(self.pause_seconds)
        self.fleet.resume(member)
        self.refresh_bases()

    async def _restart_database(self, fault: Fault) -> None:
        assert self.cluster is not None, "database faults need the soak's own cluster"
        mode = "immediate" if self._crash else "fast"
        self._crash = not self._crash
        fault.target = f"postgres ({mode})"
        await asyncio.to_thread(self.cluster.stop, mode)
        await asyncio.sleep(1)
        await asyncio.to_thread(self.cluster.start)

    async def end_all(self) -> None:
        """Whatever is still in force ends: paused processes continue, the receiver listens."""
        for task in list(self._beside):
            task.cancel()
        await asyncio.gather(*self._beside, return_exceptions=True)
        for member in self.fleet.members:
            self.fleet.resume(member)
        await self.outage_receiver.start()
        self.refresh_bases()
