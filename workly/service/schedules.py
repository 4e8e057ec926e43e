"""Schedules' use cases (docs/schedules.md): create, change, pause, resume, trigger, delete.

When schedules fire is the scheduler's (service/scheduler.py); what a firing makes is
schedules.plan_firing's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from workly.clock import Clock
from workly.errors import InvalidSchedule, ScheduleNotFound, TooLarge
from workly.ids import new_id, new_task_id
from workly.metrics import Metrics
from workly.reserved_names import check_client_queue
from workly.schedules import Schedule, ScheduleSpec, first_run, next_run, plan_firing
from workly.service.webhooks import check_not_endpoint_queue
from workly.storage.contract import ScheduleStore
from workly.webhooks import NewEvent

_SPEC_FIELDS = frozenset({"name", "cron", "timezone", "task", "event", "queue", "paused", "catch_up"})
_TEMPLATE_FIELDS = frozenset({"task", "event", "queue"})
# A change to any of these moves the next run to the first fire time after the change.
_TIMING_FIELDS = ("cron", "timezone", "paused")


class ScheduleUseCases:
    def __init__(
        self,
        schedules: ScheduleStore,
        clock: Clock,
        metrics: Metrics,
        work_available: Callable[[], None],
        wake_scheduler: Callable[[], None],
        *,
        max_body_bytes: int,
        check_event: Callable[[NewEvent], Awaitable[None]] | None = None,
    ) -> None:
        """``wake_scheduler``: this process's scheduler looks now (when it runs one);
        ``check_event``: what the catalogue says of an event template (strict mode, its
        type's schema), as of a publish, checked when the template is stored."""
        self._check_event = check_event
        self._schedules = schedules
        self._clock = clock
        self._metrics = metrics
        self._work_available = work_available
        self._wake_scheduler = wake_scheduler
        self._max_body_bytes = max_body_bytes

    async def create_schedule(self, spec: ScheduleSpec) -> Schedule:
        """Store a schedule; it fires first at its first fire time after now (unless paused).
        The cron and time zone are checked by the caller (api/schedule_schemas.py)."""
        self._check(spec)
        if spec.event is not None and self._check_event is not None:
            await self._check_event(spec.event)
        now = self._clock.now()
        # Off the event loop: telling that a cron never fires walks up to a century.
        await asyncio.to_thread(next_run, spec, now)
        schedule = await self._schedules.create_schedule(new_id("sch"), spec, first_run(spec, now), now)
        self._wake_scheduler()
        return schedule

    async def get_schedule(self, schedule_id: str) -> Schedule:
        schedule = await self._schedules.get_schedule(schedule_id)
        if schedule is None:
            raise ScheduleNotFound(schedule_id)
        return schedule

    async def list_schedules(self, limit: int, before_seq: int | None) -> tuple[list[Schedule], int | None]:
        return await self._schedules.list_schedules(limit, before_seq)

    async def update_schedule(self, schedule_id: str, changes: Mapping[str, Any]) -> Schedule:
        """Change some fields, atomically against firings. ``task`` (a template whose queue is
        ``queue`` when given, else the current one) or ``event`` replaces what it makes;
        ``queue`` alone moves its tasks to another queue. A new cron, time zone or pause
        state moves the next run to the first fire time from now."""
        unknown = set(changes) - _SPEC_FIELDS
        assert not unknown, f"not schedule fields: {unknown}"
        now = self._clock.now()
        if changes.get("event") is not None and self._check_event is not None:
            await self._check_event(changes["event"])
        if {"cron", "timezone"} & changes.keys():
            # Refused before the transaction, off the event loop, paused or not: telling that a
            # cron never fires walks up to a century.
            changed = _changed((await self.get_schedule(schedule_id)).spec, changes)
            await asyncio.to_thread(next_run, changed, now)

        def change(current: Schedule) -> tuple[ScheduleSpec, datetime | None]:
            spec = _changed(current.spec, changes)
            if _TEMPLATE_FIELDS & changes.keys():
                # Only a new template is checked: a pause must work even for a schedule whose
                # stored body a lowered WORKLY_MAX_BODY_BYTES would refuse now.
                self._check(spec)
            if all(getattr(spec, name) == getattr(current.spec, name) for name in _TIMING_FIELDS):
                return spec, current.next_run_at
            return spec, first_run(spec, now)

        schedule = await self._schedules.update_schedule(schedule_id, change, now)
        self._wake_scheduler()
        return schedule

    async def pause_schedule(self, schedule_id: str) -> Schedule:
        return await self.update_schedule(schedule_id, {"paused": True})

    async def resume_schedule(self, schedule_id: str) -> Schedule:
        return await self.update_schedule(schedule_id, {"paused": False})

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete it; the tasks and events it made stay."""
        await self._schedules.delete_schedule(schedule_id)

    async def trigger_schedule(self, schedule_id: str) -> Schedule:
        """Fire once now (paused or not), its next run unchanged; the schedule afterwards
        (``last_task_id`` or ``last_event_id`` names what the firing made)."""
        now = self._clock.now()
        made, schedule = await self._schedules.trigger_schedule(
            schedule_id,
            now,
            lambda current: plan_firing(current, now, new_task_id(), new_id("evt"), trigger=True),
            new_task_id,
        )
        self._metrics.schedule_firings.labels("triggered" if made.created else "duplicate").inc()
        if made.created:
            self._work_available()
        return schedule

    def _check(self, spec: ScheduleSpec) -> None:
        """A schedule makes either a task or an event, of an acceptable size, never into an
        endpoint's queue."""
        if (spec.task is None) == (spec.event is None):
            raise InvalidSchedule("a schedule makes either a task or an event: give exactly one of them")
        limit = self._max_body_bytes
        if spec.task is not None:
            check_not_endpoint_queue(spec.task.queue)
            check_client_queue(spec.task.queue)
            size, what = len(spec.task.body), "the task's body"
        else:
            assert spec.event is not None
            size, what = len(spec.event.payload), "the event's payload"
        if size > limit:
            raise TooLarge(f"{what} is {size:,} bytes; at most {limit:,} (WORKLY_MAX_BODY_BYTES)")


def _changed(spec: ScheduleSpec, changes: Mapping[str, Any]) -> ScheduleSpec:
    """``spec`` with ``changes`` applied (see update_schedule)."""
    plain = {name: value for name, value in changes.items() if name not in ("task", "event", "queue")}
    task, event = spec.task, spec.event
    queue = changes.get("queue")
    if changes.get("task") is not None:
        template = changes["task"]
        current_queue = "default" if spec.task is None else spec.task.queue
        task, event = replace(template, queue=queue or current_queue), None
    elif changes.get("event") is not None:
        if queue is not None:
            raise InvalidSchedule("queue applies to a task schedule; an event goes to its endpoints' queues")
        task, event = None, changes["event"]
    elif queue is not None:
        if task is None:
            raise InvalidSchedule("this schedule makes events, which go to their endpoints' queues: no queue")
        task = replace(task, queue=queue)
    return replace(spec, **plain, task=task, event=event)
