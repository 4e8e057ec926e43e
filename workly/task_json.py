"""Tasks and attempts as the JSON the API answers with: the API, the dashboard and the
callbacks a task sends (workly/callbacks.py) all show them this way."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from workly.body import encode_body, parse_json
from workly.media import header_value, is_json_type
from workly.models import Attempt, NewTask, Task


def time_text(value: datetime) -> str:
    """RFC 3339 in UTC with a Z, as the API shows every time."""
    return value.isoformat().replace("+00:00", "Z")


def body_view(headers: dict[str, str], body: bytes) -> Any:
    """The body as JSON when it is JSON, as text when it is UTF-8, else null (see body_base64)."""
    if not body:
        return None
    content_type = header_value(headers, "content-type")
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return None
    if content_type is not None and is_json_type(content_type):
        try:
            return parse_json(text)
        except ValueError:
            return text
    return text


def body_round_trips(headers: dict[str, str], body: bytes, view: Any) -> bool:
    """Whether ``body: view`` with these headers would store these very bytes and headers
    (JSON re-encoded compactly, text as UTF-8): else only base64 says what the body holds."""
    if view is None:
        return False
    try:
        return encode_body(headers, view, None) == (headers, body)
    except ValueError:
        return False


def body_fields(headers: dict[str, str], body: bytes) -> tuple[Any, str | None]:
    """(``body``, ``body_base64``) as a task shows them: one of the two, never both (a large
    body is not answered twice): ``body`` when it reads as JSON (the JSON; what no answer
    can carry again unchanged, such as NaN or a key given twice, as its text) or as UTF-8
    text, else the bytes."""
    view = body_view(headers, body)
    if view is not None:
        return view, None
    return None, base64.b64encode(body).decode() if body else None


# (``body``, ``body_base64``) as body_fields gives them, when the caller knows them already.
BodyFields = tuple[Any, str | None]


def task_json(task: Task, known_body: BodyFields | None = None) -> dict[str, Any]:
    """``known_body``: the task's body fields, if known without reading its bytes again (the
    enqueue's answer knows the JSON it was given: see TaskIn.body_fields)."""
    return {
        "id": task.id,
        "queue": task.queue,
        "status": task.status,
        "attempts": task.attempts,
        "max_attempts": task.max_attempts,
        "run_at": time_text(task.run_at),
        "created_at": time_text(task.created_at),
        "updated_at": time_text(task.updated_at),
        "last_status_code": task.last_status_code,
        "last_error": task.last_error,
        **request_json(task, known_body),
        "idempotency_key": task.idempotency_key,
        "event_id": task.event_id,
        "endpoint_id": task.endpoint_id,
        "stop_on": list(task.stop_on),
        "callback_of": task.callback_of,
        "test": task.test,
        # A running task: which process holds it, and when the reaper takes it back if that
        # process is gone (a restart interrupted it, say).
        "lease": None
        if task.lease_expires_at is None
        else {"holder": task.lease_holder, "expires_at": time_text(task.lease_expires_at)},
    }


def request_json(task: Task | NewTask, known_body: BodyFields | None = None) -> dict[str, Any]:
    """What a task sends and how it retries: the fields a stored task and a schedule's task
    template share (their ``stop_on`` and ``max_attempts`` differ: a stored task shows the
    ones in effect, a template its own or null)."""
    body, body_base64 = body_fields(task.headers, task.body) if known_body is None else known_body
    return {
        "url": task.url,
        "method": task.method,
        "headers": task.headers,
        "body": body,
        "body_base64": body_base64,
        "priority": task.priority,
        "key": task.key,
        "tenant": task.tenant,
        "timeout": task.timeout,
        "deadline": task.deadline,
        "min_backoff": task.min_backoff,
        "max_backoff": task.max_backoff,
        "callback_url": task.callback_url,
        "failure_callback_url": task.failure_callback_url,
    }


def attempt_json(attempt: Attempt) -> dict[str, Any]:
    return {
        "attempt": attempt.attempt,
        "started_at": time_text(attempt.started_at),
        "finished_at": time_text(attempt.finished_at),
        "duration_ms": attempt.duration_ms,
        "status_code": attempt.status_code,
        "error": attempt.error,
        "response": attempt.response.decode(errors="replace"),
        "stale": attempt.stale,
    }
