"""Plain-text output of the schedule commands (workly/client/schedules.py), built on the
tables and key/value blocks of render.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workly.client.render import fields, payload, short_time, table


def makes(schedule: dict[str, Any]) -> str:
    """What each firing makes: 'POST https://… in queue mail', or 'event report.ready'."""
    task = schedule["task"]
    if task is None:
        return f"event {schedule['event']['type']}"
    return f"{task['method']} {task['url']} in queue {schedule['queue']}"


def next_run(schedule: dict[str, Any]) -> str:
    """When it fires next; a paused schedule, or a cron with no time to come, has no next run."""
    if schedule["next_run_at"] is not None:
        return str(short_time(schedule["next_run_at"]))
    return f"none ({_why_no_run(schedule)})"


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
    return f"{summary}\n\n{table(['NEXT RUNS'], [[short_time(run)] for run in schedule['next_runs']])}"


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
    """The task (request, queue, headers, body) or the event (type, tenant, key, payload) it makes."""
    task, event = schedule["task"], schedule["event"]
    if task is None:
        return [
            ("event", event["type"]), ("tenant", event["tenant"]), ("key", event["key"]),
            ("payload", payload(event)),
        ]  # fmt: skip
    headers = "; ".join(f"{name}: {value}" for name, value in task["headers"].items())
    return [
        ("request", f"{task['method']} {task['url']}"), ("queue", schedule["queue"]), ("headers", headers),
        ("body", _body(task)),
    ]  # fmt: skip


def _body(task: dict[str, Any]) -> str | None:
    """The body as compact JSON (shortened, as an event's payload is), or what it is otherwise."""
    if task["body_base64"] is None:
        return None  # no body
    if task["body"] is None:
        return "bytes, not text (body_base64 in --json)"
    return payload({"payload": task["body"], "payload_base64": task["body_base64"]})
