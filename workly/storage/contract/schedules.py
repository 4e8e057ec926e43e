"""Schedules (workly/schedules.py): stored crons, and their firings made once across processes."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime
from typing import Protocol

from workly.schedules import Fired, Firing, Schedule, ScheduleSpec

# A change to a schedule: its new spec and next run, from the stored schedule, decided
# inside the writing transaction.
ScheduleChange = Callable[[Schedule], tuple[ScheduleSpec, datetime | None]]
# What a firing of a schedule makes and where the schedule goes next (schedules.plan_firing);
# None: leave that schedule as it is (this process cannot plan it).
FiringPlan = Callable[[Schedule], Firing | None]


class ScheduleStore(Protocol):
    async def create_schedule(
        self, schedule_id: str, spec: ScheduleSpec, next_run_at: datetime | None, now: datetime
    ) -> Schedule: ...

    async def get_schedule(self, schedule_id: str) -> Schedule | None: ...

    async def list_schedules(self, limit: int, before_seq: int | None) -> tuple[list[Schedule], int | None]:
        """Newest first; the int continues the list."""

    async def update_schedule(self, schedule_id: str, change: ScheduleChange, now: datetime) -> Schedule:
        """Replace the spec and next run with ``change(stored schedule)``, atomically against
        firings and other changes. Raises ScheduleNotFound, or what ``change`` raises."""

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete the schedule; the tasks and events it made stay. Raises ScheduleNotFound."""

    async def fire_due_schedules(
        self,
        now: datetime,
        limit: int,
        plan: FiringPlan,
        new_task_id: Callable[[], str],
        skip: Collection[str] = (),
    ) -> list[Fired]:
        """For up to ``limit`` schedules whose next run is at or before ``now`` (most overdue
        first), those named in ``skip`` left out: store what ``plan(schedule)`` makes (a task
        through enqueue, an event through publish, whose deliveries take ids from
        ``new_task_id``) and move the schedule to the plan's next run, in one transaction; a
        schedule the plan returns None for is left as it is. Safe in several processes at
        once: a schedule one of them is firing is skipped by the others, so each firing is
        made once."""

    async def trigger_schedule(
        self, schedule_id: str, now: datetime, plan: FiringPlan, new_task_id: Callable[[], str]
    ) -> tuple[Fired, Schedule]:
        """Fire one schedule now, whether due or paused, as fire_due_schedules fires a due one
        (waiting for a firing of it in flight); the firing and the schedule as it committed.
        Raises ScheduleNotFound."""

    async def next_schedule_at(self, skip: Collection[str] = ()) -> datetime | None:
        """The earliest next run of any schedule but those in ``skip`` (None: none will fire)."""
