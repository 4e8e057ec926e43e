"""Rows of schedules as domain objects, and a schedule's template as the JSON both dialects
store it in (``{"task": {…}}`` or ``{"event": {…}}``, bodies in base64)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from workly.json_text import from_json, to_json
from workly.models import Enqueued, NewTask
from workly.schedules import Fired, Firing, Schedule, ScheduleSpec
from workly.storage.rows import Decoders, Row
from workly.webhooks import NewEvent, Published

# The template fields kept as they are (JSON values); bodies and stop_on are converted.
_TASK_FIELDS = (
    "queue", "url", "method", "headers", "priority", "key", "tenant", "max_attempts", "timeout",
    "breaker", "deadline", "min_backoff", "max_backoff", "callback_url", "failure_callback_url",
)  # fmt: skip
_EVENT_FIELDS = ("type", "content_type", "tenant", "key", "callback_url", "failure_callback_url", "labels")


def template_json(spec: ScheduleSpec) -> str:
    if spec.task is not None:
        task = spec.task
        stored: dict[str, Any] = {name: getattr(task, name) for name in _TASK_FIELDS}
        stored["body"] = base64.b64encode(task.body).decode()
        stored["stop_on"] = None if task.stop_on is None else list(task.stop_on)
        return to_json({"task": stored})
    assert spec.event is not None
    event = spec.event
    kept = {name: getattr(event, name) for name in _EVENT_FIELDS}
    return to_json({"event": {**kept, "payload": base64.b64encode(event.payload).decode()}})


def _templates(stored: Any) -> tuple[NewTask | None, NewEvent | None]:
    template = from_json(stored) if isinstance(stored, str) else dict(stored)
    if "task" in template:
        task = dict(template["task"])
        body = base64.b64decode(task.pop("body"))
        stop_on = task.pop("stop_on")
        return NewTask(id="", body=body, stop_on=None if stop_on is None else tuple(stop_on), **task), None
    event = dict(template["event"])
    payload = base64.b64decode(event.pop("payload"))
    return None, NewEvent(id="", payload=payload, **event)


def schedule_from_row(row: Row, dec: Decoders) -> Schedule:
    task, event = _templates(row["template"])
    return Schedule(
        id=row["id"],
        spec=ScheduleSpec(
            cron=row["cron"],
            timezone=row["timezone"],
            name=row["name"],
            task=task,
            event=event,
            paused=bool(row["paused"]),
            catch_up=row["catch_up"],
        ),
        next_run_at=_time(row["next_run_at"], dec),
        last_run_at=_time(row["last_run_at"], dec),
        last_task_id=row["last_task_id"],
        last_event_id=row["last_event_id"],
        created_at=dec.time(row["created_at"]),
        updated_at=dec.time(row["updated_at"]),
    )


def spec_params(spec: ScheduleSpec, next_run_at: Any) -> dict[str, Any]:
    """The spec as insert_schedule's and update_schedule's parameters (times as the dialect
    keeps them: ``next_run_at`` is given converted)."""
    return {
        "name": spec.name,
        "cron": spec.cron,
        "timezone": spec.timezone,
        "template": template_json(spec),
        "paused": spec.paused,
        "catch_up": spec.catch_up,
        "next_run_at": next_run_at,
    }


def _time(value: Any, dec: Decoders) -> Any:
    return None if value is None else dec.time(value)


def fired(schedule_id: str, firing: Firing, enqueued: Enqueued | None, published: Published | None) -> Fired:
    """A firing as stored: the task or event it made (or found made before)."""
    if enqueued is not None:
        return Fired(schedule_id, firing.fire_at, task_id=enqueued.task.id, created=enqueued.created)
    if published is not None:
        return Fired(schedule_id, firing.fire_at, event_id=published.event.id, created=published.created)
    return Fired(schedule_id, firing.fire_at)


def advances(made: Sequence[tuple[Fired, Firing]], time: Callable[[datetime], Any]) -> list[dict[str, Any]]:
    """advance_schedules' rows, one per firing, times as the dialect keeps them."""
    return [
        {
            "id": fired_one.schedule_id,
            "next_run_at": None if firing.next_run_at is None else time(firing.next_run_at),
            "fire_at": None if firing.fire_at is None else time(firing.fire_at),
            "task_id": fired_one.task_id,
            "event_id": fired_one.event_id,
        }
        for fired_one, firing in made
    ]
