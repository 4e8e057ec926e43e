"""Domain objects as the JSON the API answers with (and the dashboard shows), and list cursors."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

from workly.media import header_value, is_json_type
from workly.models import Attempt, Queue, QueueConfig, Task


def _time(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _body_view(task: Task) -> Any:
    """The body as JSON when it is JSON, as text when it is UTF-8, else null (see body_base64)."""
    if not task.body:
        return None
    content_type = header_value(task.headers, "content-type")
    try:
        text = task.body.decode()
    except UnicodeDecodeError:
        return None
    if content_type is not None and is_json_type(content_type):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def task_json(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "queue": task.queue,
        "status": task.status,
        "attempts": task.attempts,
        "max_attempts": task.max_attempts,
        "run_at": _time(task.run_at),
        "created_at": _time(task.created_at),
        "updated_at": _time(task.updated_at),
        "last_status_code": task.last_status_code,
        "last_error": task.last_error,
        "url": task.url,
        "method": task.method,
        "headers": task.headers,
        "body": _body_view(task),
        "body_base64": base64.b64encode(task.body).decode() if task.body else None,
        "priority": task.priority,
        "key": task.key,
        "tenant": task.tenant,
        "idempotency_key": task.idempotency_key,
        "timeout": task.timeout,
        "event_id": task.event_id,
        "endpoint_id": task.endpoint_id,
    }


def attempt_json(attempt: Attempt) -> dict[str, Any]:
    return {
        "attempt": attempt.attempt,
        "started_at": _time(attempt.started_at),
        "finished_at": _time(attempt.finished_at),
        "duration_ms": attempt.duration_ms,
        "status_code": attempt.status_code,
        "error": attempt.error,
        "response": attempt.response.decode(errors="replace"),
        "stale": attempt.stale,
    }


def config_json(config: QueueConfig) -> dict[str, Any]:
    """The config as the API shows it: a queue's signing secret is never shown, only whether
    it has one."""
    shown = asdict(config)
    del shown["signing_secret"]
    return {**shown, "has_signing_secret": config.signing_secret is not None}


def queue_json(queue: Queue) -> dict[str, Any]:
    return {
        "name": queue.name,
        **config_json(queue.config),
        "counts": queue.counts,
        "created_at": _time(queue.created_at),
        "updated_at": _time(queue.updated_at),
    }


_MAX_SEQ = 2**63 - 1  # sequences are signed 64-bit in both databases


def encode_cursor(seq: int | None) -> str | None:
    return None if seq is None else base64.urlsafe_b64encode(f"s:{seq}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """Raises ValueError for anything this API did not hand out."""
    padded = cursor + "=" * (-len(cursor) % 4)
    try:
        text = base64.urlsafe_b64decode(padded.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        raise ValueError("invalid cursor") from None
    prefix, _, number = text.partition(":")
    if prefix != "s" or not number.isascii() or not number.isdigit() or int(number) > _MAX_SEQ:
        raise ValueError("invalid cursor")
    return int(number)


def time_or_null(value: datetime | None) -> str | None:
    return None if value is None else _time(value)
