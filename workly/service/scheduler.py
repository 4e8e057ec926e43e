"""The scheduler: fires due schedules (docs/schedules.md). Every dispatching process runs one.

It sleeps until the earliest next run of any schedule (at most ``poll_interval``, so a
schedule another process created or changed is seen within that), then asks storage to
fire what is due. Storage takes each due schedule under a lock (PostgreSQL: FOR UPDATE
SKIP LOCKED; SQLite: the single writer) and stores what it makes in the transaction that
moves it on, so however many schedulers run, each firing is made once. A change in this
process wakes it at once. Tasks it made wake the dispatchers (``work_available``): a task
is due at its fire time and goes out right after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from workly.clock import Clock
from workly.ids import new_id, new_task_id
from workly.metrics import Metrics
from workly.schedules import Fired, Firing, Schedule, plan_firing
from workly.storage.contract import FiringPlan

log = logging.getLogger("workly.scheduler")
BATCH = 100  # schedules fired per transaction
_SOONEST = 0.001  # seconds: a wake-up never spins
_HELD_ELSEWHERE = 0.05  # seconds between looks while another process fires what is due
_RETRY_UNPLANNABLE = timedelta(minutes=1)


class DueSchedules(Protocol):
    """What firing needs of the ScheduleStore role (tests give a stand-in of these alone)."""

    async def fire_due_schedules(
        self,
        now: datetime,
        limit: int,
        plan: FiringPlan,
        new_task_id: Callable[[], str],
        skip: Collection[str] = (),
    ) -> list[Fired]: ...

    async def next_schedule_at(self, skip: Collection[str] = ()) -> datetime | None: ...


class Scheduler:
    def __init__(
        self,
        storage: DueSchedules,
        clock: Clock,
        work_available: Callable[[], None],
        *,
        poll_interval: float = 1.0,
        metrics: Metrics | None = None,
        batch: int = BATCH,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._work_available = work_available
        self._poll_interval = poll_interval
        self._metrics = metrics or Metrics()
        self._batch = batch
        self._woken = asyncio.Event()
        self._stopping = False
        self._loop: asyncio.Task[None] | None = None
        # Schedules this process could not plan (a zone its tz database lacks), with when to
        # try again: until then they are left, due, to the processes that can.
        self._unplannable: dict[str, datetime] = {}

    def start(self) -> None:
        self._loop = asyncio.create_task(self._run(), name="workly-scheduler")

    def wake(self) -> None:
        """A schedule was created or changed here: look again now."""
        self._woken.set()

    async def stop(self) -> None:
        """After the firing in flight (its transaction commits or rolls back whole)."""
        self._stopping = True
        self._woken.set()
        if self._loop is not None:
            await asyncio.gather(self._loop, return_exceptions=True)

    async def fire_due(self) -> list[Fired]:
        """Fire every schedule due now, a batch per transaction, until none is left or the
        scheduler stops; what was fired. Each batch that made something wakes the dispatchers
        as it commits. "Now" is the round's: a long round does not make its later batches'
        fire times look missed."""
        now = self._clock.now()
        fired: list[Fired] = []
        while not self._stopping:
            batch = await self._storage.fire_due_schedules(
                now, self._batch, self._planner(now), new_task_id, skip=self._skipped(now)
            )
            count_firings(self._metrics, batch, self._clock.now())
            if any(made.created for made in batch):
                self._work_available()
            fired.extend(batch)
            if len(batch) < self._batch:
                break
        return fired

    async def _run(self) -> None:
        while not self._stopping:
            self._woken.clear()  # a wake from here on makes one more round
            try:
                # A read: an idle process writes nothing.
                next_run_at = await self._storage.next_schedule_at(self._skipped(self._clock.now()))
                if next_run_at is not None and next_run_at <= self._clock.now():
                    await self.fire_due()
                    next_run_at = await self._storage.next_schedule_at(self._skipped(self._clock.now()))
                delay = self._until(next_run_at)
            except Exception as exc:
                log.warning("firing schedules failed (trying again in %gs): %s", self._poll_interval, exc)
                delay = self._poll_interval
            # A stop sets the event too: the wait ends at once and the loop with it.
            await self._clock.wait(self._woken, delay)

    def _planner(self, now: datetime) -> FiringPlan:
        def plan(schedule: Schedule) -> Firing | None:
            try:
                return plan_firing(schedule, now, new_task_id(), new_id("evt"))
            except ValueError as exc:
                # Its stored zone is not in this host's tz database (a process on an older
                # tzdata): left as it is, due, for a process that has it; the batch goes on.
                log.warning("schedule %s cannot fire here: %s (trying again in a minute)", schedule.id, exc)
                self._unplannable[schedule.id] = now + _RETRY_UNPLANNABLE
                return None

        return plan

    def _skipped(self, now: datetime) -> list[str]:
        """The schedules this process leaves to others for now."""
        self._unplannable = {key: until for key, until in self._unplannable.items() if until > now}
        return list(self._unplannable)

    def _until(self, next_run_at: datetime | None) -> float:
        if next_run_at is None:
            return self._poll_interval
        wait = (next_run_at - self._clock.now()).total_seconds()
        if wait <= 0:
            # Still due after a round: another process holds it (PostgreSQL SKIP LOCKED) and
            # moves it on when it commits. Look again soon, without spinning.
            return min(self._poll_interval, _HELD_ELSEWHERE)
        return min(self._poll_interval, max(_SOONEST, wait))


def count_firings(metrics: Metrics, fired: Sequence[Fired], stored_at: datetime) -> None:
    """Firings by outcome, and how late each made its task or event (``stored_at``: after
    the commit)."""
    for made in fired:
        if made.fire_at is None:
            metrics.schedule_firings.labels("skipped").inc()
        elif made.created:
            metrics.schedule_firings.labels("created").inc()
            metrics.schedule_lateness.observe(max(0.0, (stored_at - made.fire_at).total_seconds()))
        else:
            metrics.schedule_firings.labels("duplicate").inc()
