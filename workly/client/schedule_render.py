"""Plain-text output of the schedule commands (workly/client/schedules.py), built on the
tables and key/value blocks of render.py."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from workly.client.render import fields, short_json, short_time, table


def makes(schedule: dict[str, Any]) -> str:
    """What each firing makes: 'POST https://… in queue mail', or 'event report.ready'."""
    task = schedule["task"]
    if task is None:
        return f"event {schedule['event']['type']}"
    return f"{task['method']} {task['url']} in queue {schedule['queue']}"


def next_run(schedule: dict[str, Any]) -> str:
    """When it fires next; a paused schedule, or a cron with no time to come, has no next run."""
    if schedule["next_run_at"] is not None:
        return fire_time(schedule["next_run_at"], schedule["timezone"])
    return f"none ({_why_no_run(schedule)})"


def fire_time(run: str, timezone: str) -> str:
    """A fire time in UTC, with the wall-clock time in the schedule's zone beside it when that
    is not UTC: '2026-12-02 08:00:00Z (09:00 Europe/Amsterdam)', with the local date too when
    it is another day there. UTC alone when this host's tz database lacks the zone. (One space:
    a table cell would make two spaces one.)"""
    utc = str(short_time(run))
    instant = datetime.fromisoformat(run.replace("Z", "+00:00"))
    try:
        local = instant.astimezone(ZoneInfo(timezone))
    except (ZoneInfoNotFoundError, ValueError, OSError):  # not in this host's tz database
        return utc
    if local.tzname() == "UTC":  # UTC by another name (Etc/UTC)
        return utc
    wall_clock = f"{local:%H:%M}" if local.date() == instant.date() else f"{local:%Y-%m-%d %H:%M}"
    return f"{utc} ({wall_clock} {timezone})"


def last_made(schedule: dict[str, Any]) -> str | None:
    """The id of the task or event its last firing made (None: it has not fired yet)."""
    made: str | None = schedule["last_task_id"] or schedule["last_event_id"]
    return made


def schedule_rows(schedules: Sequence[dict[str, Any]]) -> str:
    return table(
        ["ID", "NAME", "CRON", "TIMEZONE", "STATE", "NEXT RUN", "LAST RUN", "LAST MADE"],
        [
            [
                s["id"], s["name"], s["cron"], s["timezone"], _state(s), short_time(s["next_run_at"]),
                short_time(s["last_run_at"]), last_made(s),
            ]
            for s in schedules
        ],
    )  # fmt: skip


def schedule_detail(schedule: dict[str, Any]) -> str:
    summary = fields(
        [
            ("id", schedule["id"]), ("name", schedule["name"]), ("cron", schedule["cron"]),
            ("timezone", schedule["timezone"]), ("state", _state(schedule)),
            ("catch up", schedule["catch_up"]),
            *_template_fields(schedule),
            ("next run", next_run(schedule)), ("last run", short_time(schedule["last_run_at"])),
            ("last task" if schedule["task"] else "last event", last_made(schedule)),
            ("created", short_time(schedule["created_at"])), ("updated", short_time(schedule["updated_at"])),
        ]
    )  # fmt: skip
    if not schedule["next_runs"]:
        return f"{summary}\n\nno next runs: {_why_no_run(schedule)}"
    runs = [[fire_time(run, schedule["timezone"])] for run in schedule["next_runs"]]
    return f"{summary}\n\n{table(['NEXT RUNS'], runs)}"


def schedule_created(schedule: dict[str, Any]) -> str:
    timing = f"cron '{schedule['cron']}' ({schedule['timezone']})"
    return f"{schedule['id']} created: {makes(schedule)}, {timing}, next run {next_run(schedule)}"


def schedule_state(done: str, schedule: dict[str, Any]) -> str:
    """'sch_… paused, next run none (paused)': after pause or resume."""
    return f"{schedule['id']} {done}, next run {next_run(schedule)}"


def triggered(schedule: dict[str, Any]) -> str:
    made = f"task {schedule['last_task_id']}" if schedule["task"] else f"event {schedule['last_event_id']}"
    return f"{schedule['id']} triggered: made {made}"


def _why_no_run(schedule: dict[str, Any]) -> str:
    return "paused" if schedule["paused"] else "its cron matches no time to come"


def _state(schedule: dict[str, Any]) -> str:
    return "paused" if schedule["paused"] else "active"


def _template_fields(schedule: dict[str, Any]) -> list[tuple[str, object]]:
    """The task (request, queue, headers, body) or the event (type, payload) it makes, and the
    template's own settings (those that are set: the others are the server's defaults)."""
    task, event = schedule["task"], schedule["event"]
    if task is None:
        return [("event", event["type"]), ("payload", _payload(event)), *_set(event, _EVENT_SETTINGS)]
    headers = "; ".join(f"{name}: {value}" for name, value in task["headers"].items())
    return [
        ("request", f"{task['method']} {task['url']}"), ("queue", schedule["queue"]), ("headers", headers),
        ("body", _body(task)), *_set(task, _TASK_SETTINGS),
    ]  # fmt: skip


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _stop_on(statuses: list[str]) -> str:
    return ", ".join(statuses) or "nothing: every failure is retried"


# A template's settings, as (field, label, how its value is shown), in the order they are shown.
Setting = tuple[str, str, Callable[[Any], str]]
_ROUTING: list[Setting] = [("tenant", "tenant", str), ("key", "key", str)]
_CALLBACKS: list[Setting] = [
    ("callback_url", "callback", str), ("failure_callback_url", "failure callback", str),
]  # fmt: skip
_EVENT_SETTINGS: list[Setting] = [*_ROUTING, *_CALLBACKS]
_TASK_SETTINGS: list[Setting] = [
    ("priority", "priority", str), *_ROUTING, ("max_attempts", "max attempts", str),
    ("timeout", "timeout", _seconds), ("stop_on", "stops on", _stop_on),
    ("deadline", "deadline", lambda d: f"{d:g} s after each task is made"),
    ("min_backoff", "min backoff", _seconds), ("max_backoff", "max backoff", _seconds), *_CALLBACKS,
]  # fmt: skip


def _set(template: dict[str, Any], settings: list[Setting]) -> list[tuple[str, object]]:
    """The settings of ``template`` that are not null, each as its label and its value shown."""
    found = [(label, show, template.get(field)) for field, label, show in settings]
    return [(label, show(value)) for label, show, value in found if value is not None]


# A template shows its body (payload) as JSON or text when it is, else as base64 alone.


def _body(task: dict[str, Any]) -> str | None:
    """The body as compact JSON or text (shortened), what it is otherwise; None: no body."""
    if "body" in task:
        return short_json(task["body"])
    if task.get("body_base64") is None:
        return None
    return f"{len(base64.b64decode(task['body_base64']))} bytes, not text (body_base64 in --json)"


def _payload(event: dict[str, Any]) -> str:
    """The payload as compact JSON (shortened), or its size when it is not JSON."""
    if "payload" in event:
        return short_json(event["payload"])
    return f"{len(base64.b64decode(event['payload_base64']))} bytes, not JSON (payload_base64 in --json)"
