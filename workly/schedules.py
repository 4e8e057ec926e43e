"""Schedules: a task or an event made by cron (docs/schedules.md).

A schedule keeps a template (the task, or the event, without its id and time) and when it
fires next. Each firing makes one task (or event) due at the fire time, whose idempotency
key ``schedule:<id>:<fire time>`` makes a second try of the same firing store nothing;
storage makes it and advances the schedule in one transaction (``fire_due_schedules``).
What a firing makes, and where the schedule goes next, is decided here (``plan_firing``),
as pure logic over the schedule and the time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from workly.cron import HORIZON_YEARS, fire_times, latest_fire, next_fire
from workly.errors import InvalidSchedule
from workly.models import NewTask
from workly.reserved_names import IDEMPOTENCY_KEY_PREFIX
from workly.webhooks import NewEvent

CatchUp = Literal["latest", "none"]
CATCH_UP: tuple[CatchUp, ...] = ("latest", "none")
NEXT_RUNS = 5  # how many coming fire times a schedule shows
# A fire time the scheduler reaches more than this late was missed (the service was down,
# or too busy): ``catch_up: none`` skips it. Anything sooner is the scheduler's own latency.
MISSED_AFTER = timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """What the schedule makes and when. Exactly one of ``task`` and ``event`` is set: a
    template whose ``id``, ``run_at`` and ``idempotency_key`` each firing sets."""

    cron: str
    timezone: str = "UTC"
    name: str | None = None
    task: NewTask | None = None
    event: NewEvent | None = None
    paused: bool = False
    catch_up: CatchUp = "latest"


@dataclass(frozen=True, slots=True)
class Schedule:
    id: str
    spec: ScheduleSpec
    next_run_at: datetime | None  # None: paused (or no fire time is left)
    last_run_at: datetime | None  # the fire time of its last firing
    last_task_id: str | None
    last_event_id: str | None
    created_at: datetime
    updated_at: datetime

    def next_runs(self, count: int = NEXT_RUNS) -> list[datetime]:
        """Its coming fire times, starting at ``next_run_at`` (only that one when its zone is
        not in this host's tz database: a schedule stored where it was is still shown)."""
        if self.next_run_at is None:
            return []
        spec = self.spec
        try:
            coming = fire_times(spec.cron, spec.timezone, self.next_run_at, count - 1)
        except ValueError:
            coming = []
        return [self.next_run_at, *coming]


@dataclass(frozen=True, slots=True)
class Firing:
    """What storage does for one schedule, in the transaction that advances it."""

    next_run_at: datetime | None
    fire_at: datetime | None = None  # None: nothing is made (a missed time skipped)
    task: NewTask | None = None
    event: NewEvent | None = None


@dataclass(frozen=True, slots=True)
class Fired:
    """A firing as stored: what it made (``created`` False: that firing had been made before,
    the id is the earlier one's)."""

    schedule_id: str
    fire_at: datetime | None  # None: a missed time was skipped (catch_up none)
    task_id: str | None = None
    event_id: str | None = None
    created: bool = False


def first_run(spec: ScheduleSpec, now: datetime) -> datetime | None:
    """When a schedule created or changed (cron, zone, resumed) at ``now`` fires first; None
    while paused (nothing is computed: a paused schedule whose zone this host lacks can
    still be paused). InvalidSchedule when it has no fire time (see next_run)."""
    return None if spec.paused else next_run(spec, now)


def next_run(spec: ScheduleSpec, now: datetime) -> datetime:
    """The first fire time after ``now``, paused or not. InvalidSchedule for a cron that never
    fires in its zone (within HORIZON_YEARS), or a zone this host's tz database lacks: a
    schedule that can never fire is refused."""
    try:
        coming = next_fire(spec.cron, spec.timezone, now)
    except ValueError as exc:
        raise InvalidSchedule(f"{exc}: give the schedule another timezone") from None
    if coming is None:
        raise InvalidSchedule(
            f"cron {spec.cron!r} never fires in {spec.timezone} (not within {HORIZON_YEARS} years): "
            "its times do not exist there (a day no month has, a skipped hour), or its day-of-month "
            "and day-of-week fields, one starting with *, never agree"
        )
    return coming


def firing_key(schedule_id: str, fire_at: datetime) -> str:
    """The idempotency key of one firing: the same firing made twice is stored once."""
    return f"{IDEMPOTENCY_KEY_PREFIX}{schedule_id}:{fire_at.isoformat().replace('+00:00', 'Z')}"


def plan_firing(
    schedule: Schedule, now: datetime, new_task_id: str, new_event_id: str, *, trigger: bool = False
) -> Firing:
    """The firing of a due schedule (``trigger``: one made by hand now, the schedule's next
    run unchanged).

    A due schedule fires for the latest of its fire times that have passed (one firing
    however many were missed); with ``catch_up: none`` only if that time is not
    MISSED_AFTER old. Either way it moves to its first fire time after ``now``."""
    spec = schedule.spec
    if trigger:
        return _make(schedule, now, schedule.next_run_at, new_task_id, new_event_id)
    due = schedule.next_run_at
    assert due is not None and due <= now, "only a due schedule fires"
    following = next_fire(spec.cron, spec.timezone, due)
    if following is None or following > now:  # on time: one step, no search
        fire_at, coming = due, following
    else:  # more than one fire time has passed: the latest of them fires
        fire_at = latest_fire(spec.cron, spec.timezone, following, now) or following
        coming = next_fire(spec.cron, spec.timezone, now)
    if spec.catch_up == "none" and now - fire_at > MISSED_AFTER:
        return Firing(next_run_at=coming)
    return _make(schedule, fire_at, coming, new_task_id, new_event_id)


def _make(
    schedule: Schedule, fire_at: datetime, next_run_at: datetime | None, new_task_id: str, new_event_id: str
) -> Firing:
    key = firing_key(schedule.id, fire_at)
    spec = schedule.spec
    if spec.task is not None:
        task = replace(spec.task, id=new_task_id, run_at=fire_at, idempotency_key=key)
        return Firing(next_run_at=next_run_at, fire_at=fire_at, task=task)
    assert spec.event is not None
    event = replace(spec.event, id=new_event_id, run_at=fire_at, idempotency_key=key)
    return Firing(next_run_at=next_run_at, fire_at=fire_at, event=event)
