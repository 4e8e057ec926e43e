"""Schedules as the JSON the API answers with (and the dashboard shows)."""

from __future__ import annotations

import base64
from typing import Any

from workly.media import is_json_type
from workly.models import NewTask
from workly.schedules import Schedule
from workly.task_json import body_round_trips, request_json
from workly.web.representation import time_or_null
from workly.web.webhook_representation import payload_view
from workly.webhooks import NewEvent


def _task_template_json(task: NewTask) -> dict[str, Any]:
    """The task each firing makes, as an enqueue body that would make it: ``body`` when it
    reads as JSON or text, else ``body_base64`` (never both, so it can be sent back as it is
    in a PATCH)."""
    shown = {
        **request_json(task),
        "max_attempts": task.max_attempts,
        "stop_on": None if task.stop_on is None else list(task.stop_on),
    }
    if body_round_trips(task.headers, task.body, shown["body"]):
        del shown["body_base64"]
    else:  # sending it back as body would store other bytes: only body_base64 says what it holds
        shown["body_base64"] = base64.b64encode(task.body).decode() if task.body else None
        del shown["body"]
    return shown


def _event_template_json(event: NewEvent) -> dict[str, Any]:
    """The event each firing publishes, as a publish body that would make it: ``payload`` for
    JSON, else ``payload_base64`` (never both)."""
    # A JSON payload came in as `payload` (compact JSON); any other as payload_base64.
    shown = "payload" if is_json_type(event.content_type) else "payload_base64"
    payload = payload_view(event.content_type, event.payload)
    return {
        "type": event.type,
        shown: payload if shown == "payload" else base64.b64encode(event.payload).decode(),
        "tenant": event.tenant,
        "key": event.key,
        "callback_url": event.callback_url,
        "failure_callback_url": event.failure_callback_url,
        "labels": event.labels or {},
    }


def schedule_json(schedule: Schedule) -> dict[str, Any]:
    spec = schedule.spec
    return {
        "id": schedule.id,
        "name": spec.name,
        "cron": spec.cron,
        "timezone": spec.timezone,
        "queue": None if spec.task is None else spec.task.queue,
        "task": None if spec.task is None else _task_template_json(spec.task),
        "event": None if spec.event is None else _event_template_json(spec.event),
        "paused": spec.paused,
        "catch_up": spec.catch_up,
        "next_run_at": time_or_null(schedule.next_run_at),
        "next_runs": [time_or_null(run) for run in schedule.next_runs()],
        "last_run_at": time_or_null(schedule.last_run_at),
        "last_task_id": schedule.last_task_id,
        "last_event_id": schedule.last_event_id,
        "created_at": time_or_null(schedule.created_at),
        "updated_at": time_or_null(schedule.updated_at),
    }
