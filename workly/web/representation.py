"""Domain objects as the JSON the API answers with (and the dashboard shows), and list cursors."""

from __future__ import annotations

import base64
from dataclasses import asdict
from datetime import datetime
from typing import Any

from workly.models import Queue, QueueConfig
from workly.operations import Operation
from workly.task_json import attempt_json, task_json, time_text

__all__ = [
    "attempt_json",
    "config_json",
    "decode_cursor",
    "encode_cursor",
    "operation_json",
    "queue_json",
    "task_json",
    "time_or_null",
]


def config_json(config: QueueConfig) -> dict[str, Any]:
    """The config as the API shows it: a queue's signing secret is never shown, only whether
    it has one."""
    shown = asdict(config)
    del shown["signing_secret"]
    shown["stop_on"] = list(config.stop_on)
    return {**shown, "has_signing_secret": config.signing_secret is not None}


def queue_json(queue: Queue) -> dict[str, Any]:
    return {
        "name": queue.name,
        **config_json(queue.config),
        "counts": queue.counts,
        "created_at": time_text(queue.created_at),
        "updated_at": time_text(queue.updated_at),
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
    return None if value is None else time_text(value)


def operation_json(operation: Operation) -> dict[str, Any]:
    return {
        "id": operation.id,
        "action": operation.action,
        "filter": operation.filter.given(),
        "state": operation.state,
        "matched": operation.matched,
        "changed": operation.changed,
        "skipped": operation.skipped,
        "error": operation.error,
        "created_at": time_text(operation.created_at),
        "updated_at": time_text(operation.updated_at),
        "finished_at": time_or_null(operation.finished_at),
    }
