"""Request bodies of the schedule routes (docs/schedules.md); unknown fields are rejected,
like every request body of API v1."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from workly.api.schemas import TaskIn, _Strict
from workly.api.webhook_schemas import EventIn
from workly.cron import MAX_CRON_LENGTH, MAX_ZONE_LENGTH, check_cron, check_timezone
from workly.models import QUEUE_NAME, NewTask
from workly.schedules import ScheduleSpec
from workly.webhooks import NewEvent

DEFAULT_QUEUE = "default"
# Set by each firing: the task is due at its fire time, and the firing's key makes it once.
_SET_PER_FIRING = ("delay", "run_at", "idempotency_key")
# new_task and new_event add a delay to "now": a template has none, so no now is needed.
_NO_DELAY = datetime(1970, 1, 1, tzinfo=UTC)
ScheduleName = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]
QueueName = Annotated[str, Field(max_length=128, pattern=f"^{QUEUE_NAME}$")]
Cron = Annotated[
    str,
    Field(
        max_length=MAX_CRON_LENGTH,
        description="five fields: minute hour day-of-month month day-of-week, e.g. */5 * * * *",
    ),
]
TimeZone = Annotated[
    str, Field(max_length=MAX_ZONE_LENGTH, description="IANA time zone, e.g. Europe/Amsterdam")
]


def _refuse_per_firing_fields(data: Any, what: str) -> Any:
    if isinstance(data, dict):
        given = [name for name in _SET_PER_FIRING if name in data]
        if given:
            raise ValueError(
                f"a schedule's {what} takes no {', '.join(given)}: each firing is due at its fire time "
                "and carries the key schedule:<id>:<fire time>"
            )
    return data


class ScheduleTaskIn(TaskIn):
    """An enqueue body without delay, run_at and idempotency_key (left out of the schema too)."""

    delay: SkipJsonSchema[None] = None
    run_at: SkipJsonSchema[None] = None
    idempotency_key: SkipJsonSchema[None] = None

    @model_validator(mode="before")
    @classmethod
    def _no_timing(cls, data: Any) -> Any:
        return _refuse_per_firing_fields(data, "task")

    def template(self, queue: str) -> NewTask:
        """The task each firing makes, less its id, run_at and key (the firing's)."""
        return replace(self.new_task(queue, _NO_DELAY), id="")


class ScheduleEventIn(EventIn):
    """A publish body without delay, run_at and idempotency_key (left out of the schema too)."""

    delay: SkipJsonSchema[None] = None
    run_at: SkipJsonSchema[None] = None
    idempotency_key: SkipJsonSchema[None] = None

    @model_validator(mode="before")
    @classmethod
    def _no_timing(cls, data: Any) -> Any:
        return _refuse_per_firing_fields(data, "event")

    def template(self) -> NewEvent:
        """The event each firing publishes, less its id, run_at and key (the firing's)."""
        return replace(self.new_event(_NO_DELAY, None), id="")


class _Timing(_Strict):
    @field_validator("cron", check_fields=False)
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        return None if value is None else check_cron(value)

    @field_validator("timezone", check_fields=False)
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        return None if value is None else check_timezone(value)


class ScheduleIn(_Timing):
    name: ScheduleName | None = Field(default=None, description="for people; need not be unique")
    cron: Cron
    timezone: TimeZone = "UTC"
    queue: QueueName | None = Field(
        default=None, description=f"a task schedule's queue (default {DEFAULT_QUEUE})"
    )
    task: ScheduleTaskIn | None = Field(default=None, description="the task each firing enqueues")
    event: ScheduleEventIn | None = Field(default=None, description="or the event each firing publishes")
    paused: bool = False
    catch_up: Literal["latest", "none"] = Field(
        default="latest",
        description="after downtime: latest fires once for the missed window, none skips to the next time",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> ScheduleIn:
        if (self.task is None) == (self.event is None):
            raise ValueError("give exactly one of task (enqueue a task) and event (publish an event)")
        if self.event is not None and self.queue is not None:
            raise ValueError("queue applies to a task schedule; an event goes to its endpoints' queues")
        return self

    def spec(self) -> ScheduleSpec:
        return ScheduleSpec(
            cron=self.cron,
            timezone=self.timezone,
            name=self.name,
            task=None if self.task is None else self.task.template(self.queue or DEFAULT_QUEUE),
            event=None if self.event is None else self.event.template(),
            paused=self.paused,
            catch_up=self.catch_up,
        )


class SchedulePatchIn(_Timing):
    """Some fields: only the fields given change. ``name: null`` removes the name."""

    name: ScheduleName | None = None
    cron: Cron | None = None
    timezone: TimeZone | None = None
    queue: QueueName | None = None
    task: ScheduleTaskIn | None = None
    event: ScheduleEventIn | None = None
    paused: bool | None = None
    catch_up: Literal["latest", "none"] | None = None

    @model_validator(mode="after")
    def _no_null_where_a_value_is_needed(self) -> SchedulePatchIn:
        for name in self.model_fields_set - {"name"}:
            if getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null")
        if self.task is not None and self.event is not None:
            raise ValueError("give at most one of task and event")
        return self

    def changes(self) -> dict[str, Any]:
        found: dict[str, Any] = {name: getattr(self, name) for name in self.model_fields_set}
        if self.task is not None:
            found["task"] = self.task.template(self.queue or DEFAULT_QUEUE)
        if self.event is not None:
            found["event"] = self.event.template()
        return found
