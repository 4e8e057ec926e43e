"""Plain-text output of the client commands: aligned tables and key/value blocks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from workly.models import TASK_STATUSES

_CELL_MAX = 60
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell; a cell is one line of at most 60 characters."""
    cells = [list(headers)] + [[_cell(value) for value in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def fields(pairs: Sequence[tuple[str, object]]) -> str:
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {_cell(value, limit=None)}" for name, value in pairs)


def _cell(value: object, limit: int | None = _CELL_MAX) -> str:
    text = "-" if value is None or value == "" else str(value)
    text = " ".join(text.split())  # one line: a response snippet or error may hold newlines
    # A receiver's answer is shown here: no escape sequence reaches the terminal as one.
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def short_time(value: str | None) -> str | None:
    """2026-11-30T09:10:06.972118Z → 2026-11-30 09:10:06Z (the API's times are UTC)."""
    if value is None:
        return None
    return value.replace("T", " ").split(".")[0].removesuffix("Z") + "Z"


def outcome(task: dict[str, Any]) -> str | None:
    """What the last attempt did: its HTTP status, else its error."""
    if task.get("last_status_code") is not None:
        return str(task["last_status_code"])
    error: str | None = task.get("last_error")
    return error


def task_rows(tasks: Sequence[dict[str, Any]]) -> str:
    return table(
        ["ID", "QUEUE", "STATUS", "ATTEMPTS", "RUN AT", "LAST", "URL"],
        [
            [
                t["id"], t["queue"], t["status"], f"{t['attempts']}/{t['max_attempts']}",
                short_time(t["run_at"]), outcome(t), f"{t['method']} {t['url']}",
            ]
            for t in tasks
        ],
    )  # fmt: skip


def queue_rows(queues: Sequence[dict[str, Any]]) -> str:
    return table(
        ["QUEUE", "STATE", *(status.upper() for status in TASK_STATUSES), "CONCURRENCY", "RATE/S"],
        [
            [
                q["name"], "paused" if q["paused"] else "active",
                *(q["counts"].get(status, 0) for status in TASK_STATUSES),
                q["max_concurrency"], q["rate_limit"],
            ]
            for q in queues
        ],
    )  # fmt: skip


def enqueued(task: dict[str, Any]) -> str:
    return f"{task['id']} {task['status']} in queue {task['queue']}, due {short_time(task['run_at'])}"


def task_detail(task: dict[str, Any], attempts: Sequence[dict[str, Any]]) -> str:
    summary = fields(
        [
            ("id", task["id"]), ("queue", task["queue"]), ("status", task["status"]),
            ("request", f"{task['method']} {task['url']}"),
            ("attempts", f"{task['attempts']} of {task['max_attempts']}"),
            ("run at", short_time(task["run_at"])), ("created", short_time(task["created_at"])),
            ("updated", short_time(task["updated_at"])), ("key", task["key"]), ("tenant", task["tenant"]),
            ("priority", task["priority"]), ("last status", task["last_status_code"]),
            ("last error", task["last_error"]),
        ]
    )  # fmt: skip
    if not attempts:
        return summary + "\n\nno attempts yet"
    listed = table(
        ["#", "STARTED", "MS", "STATUS", "ERROR", "RESPONSE"],
        [
            [
                a["attempt"], short_time(a["started_at"]), round(a["duration_ms"]),
                a["status_code"], (a["error"] or "") + (" (stale)" if a["stale"] else ""), a["response"],
            ]
            for a in attempts
        ],
    )  # fmt: skip
    return f"{summary}\n\n{listed}"
