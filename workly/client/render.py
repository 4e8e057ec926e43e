"""Plain-text output of the client commands: aligned tables and key/value blocks."""

from __future__ import annotations

import base64
import json
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


def one_line(value: object) -> str:
    """A value the server sent, on one line with no control character (as a table cell is)."""
    return _cell(value, limit=None)


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


def queue_detail(queue: dict[str, Any]) -> str:
    """One queue: its settings, then its tasks per status."""
    counts = ", ".join(f"{queue['counts'].get(status, 0)} {status}" for status in TASK_STATUSES)
    return fields(
        [
            ("queue", queue["name"]), ("state", "paused" if queue["paused"] else "active"),
            ("concurrency", queue["max_concurrency"]),
            ("rate limit", "none" if queue["rate_limit"] is None else f"{queue['rate_limit']:g}/s"),
            ("attempts", f"at most {queue['max_attempts']}"), ("timeout", f"{queue['timeout']:g} s"),
            ("backoff", f"{queue['min_backoff']:g}-{queue['max_backoff']:g} s"),
            ("ordering", queue["ordering"]),
            ("stops on", " ".join(queue["stop_on"]) or "nothing"),
            ("deadline", "none" if queue["deadline"] is None else f"{queue['deadline']:g} s"),
            ("own secret", "yes" if queue["has_signing_secret"] else "no"), ("tasks", counts),
        ]
    )  # fmt: skip


def task_outcome(task: dict[str, Any], attempts: Sequence[dict[str, Any]]) -> str:
    """How a task ended: its status, after how many attempts, with the last answer."""
    last = attempts[-1] if attempts else None
    answer = ""
    if last is not None:
        answer = f": {last['status_code']}" if last["status_code"] is not None else f": {last['error']}"
    made = (
        f"after {len(attempts)} attempt{'s' if len(attempts) != 1 else ''}"
        if attempts
        else "without an attempt"
    )
    return f"{task['id']} {task['status']} {made}{answer}"


def enqueued(task: dict[str, Any], created: bool = True) -> str:
    again = "" if created else " (enqueued before: same idempotency key)"
    return f"{task['id']} {task['status']} in queue {task['queue']}, due {short_time(task['run_at'])}{again}"


def _lease_field(task: dict[str, Any]) -> list[tuple[str, Any]]:
    """Why a task is still running: who holds it, until when."""
    lease = task.get("lease")
    if not lease:
        return []
    holder = lease["holder"] or "a process"
    return [(
        "held by",
        f"{holder} until {short_time(lease['expires_at'])} (if that process has stopped, the task "
        "returns to ready then)",
    )]  # fmt: skip


def task_detail(task: dict[str, Any], attempts: Sequence[dict[str, Any]]) -> str:
    summary = fields(
        [
            ("id", task["id"]), ("queue", task["queue"]), ("status", task["status"]),
            *_lease_field(task),
            ("request", f"{task['method']} {task['url']}"),
            ("attempts", f"{task['attempts']} of {task['max_attempts']}"),
            ("run at", short_time(task["run_at"])), ("created", short_time(task["created_at"])),
            ("updated", short_time(task["updated_at"])), ("key", task["key"]), ("tenant", task["tenant"]),
            ("priority", task["priority"]), ("last status", task["last_status_code"]),
            ("last error", task["last_error"]),
            *_policy_fields(task),
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


def _policy_fields(task: dict[str, Any]) -> list[tuple[str, object]]:
    """The retry policy in effect, and the callbacks (only the lines that say something)."""
    shown: list[tuple[str, object]] = [
        ("stops on", ", ".join(task["stop_on"]) or "nothing: every failure is retried"),
        ("backoff", f"{task['min_backoff']:g}-{task['max_backoff']:g} s"),
    ]
    optional = [
        ("deadline", None if task["deadline"] is None else f"{task['deadline']:g} s after creation/redrive"),
        ("callback", task["callback_url"]), ("failure callback", task["failure_callback_url"]),
        ("callback of", task["callback_of"]),
    ]  # fmt: skip
    return shown + [(name, value) for name, value in optional if value is not None]


# Endpoints and events (the webhook platform).

_PAYLOAD_MAX = 300


def event_types(endpoint: dict[str, Any]) -> str:
    """The types an endpoint subscribes to, comma separated; ``*`` for every type."""
    types: list[str] | None = endpoint["event_types"]
    return "*" if types is None else ",".join(types)


def endpoint_rows(endpoints: Sequence[dict[str, Any]]) -> str:
    return table(
        ["ID", "STATE", "URL", "EVENTS", "TENANT", "FAILURES", "LAST SUCCESS"],
        [
            [
                e["id"], e["health"]["state"], e["url"], event_types(e), e["tenant"],
                e["health"]["consecutive_failures"], short_time(e["health"]["last_success_at"]),
            ]
            for e in endpoints
        ],
    )  # fmt: skip


def endpoint_detail(endpoint: dict[str, Any], secret: str | None = None) -> str:
    health = endpoint["health"]
    rate = endpoint["rate_limit"]
    pairs: list[tuple[str, object]] = [
        ("id", endpoint["id"]), ("url", endpoint["url"]), ("description", endpoint["description"]),
        ("state", health["state"]), ("event types", event_types(endpoint)), ("tenant", endpoint["tenant"]),
        ("filter", None if endpoint.get("filter") is None else json.dumps(endpoint["filter"])),
        ("payload format", endpoint.get("payload_format")),
        ("headers", "; ".join(f"{name}: {value}" for name, value in endpoint["headers"].items())),
        ("failures", health["consecutive_failures"]), ("failing since", short_time(health["failing_since"])),
        ("last success", short_time(health["last_success_at"])),
        ("disabled reason", health["disabled_reason"]), ("probe at", short_time(health["probe_at"])),
        ("concurrency", endpoint["max_concurrency"]), ("rate limit", None if rate is None else f"{rate:g}/s"),
        ("max attempts", endpoint["max_attempts"]),
        ("backoff", f"{endpoint['min_backoff']:g}s to {endpoint['max_backoff']:g}s"),
        ("timeout", f"{endpoint['timeout']:g}s"), ("ordering", endpoint["ordering"]),
        ("created", short_time(endpoint["created_at"])), ("updated", short_time(endpoint["updated_at"])),
    ]  # fmt: skip
    if secret is not None:
        pairs.append(("signing secret", secret))
    return fields(pairs)


def endpoint_created(endpoint: dict[str, Any]) -> str:
    """With what its receiver verifies: its signing secret, or its public key (ed25519)."""
    tenant = f" (tenant {endpoint['tenant']})" if endpoint["tenant"] is not None else ""
    verify_with = (
        f"public key {endpoint['public_key']}"
        if "public_key" in endpoint
        else f"signing secret {endpoint['signing_secret']}"
    )
    return (
        f"{endpoint['id']} created: POST {endpoint['url']} for {event_types(endpoint)}{tenant}\n{verify_with}"
    )


def delivery_rows(deliveries: Sequence[dict[str, Any]]) -> str:
    return table(
        ["ENDPOINT", "TASK", "STATUS", "ATTEMPTS"],
        [[d["endpoint_id"], d["task_id"], d["status"], d["attempts"]] for d in deliveries],
    )


def published(event: dict[str, Any], created: bool) -> str:
    done = "published" if created else "was published before (same idempotency key)"
    count = len(event["deliveries"])
    if not count:
        return f"{event['id']} {done}: {event['type']}, to no endpoint (none enabled subscribes to it)"
    to = "1 endpoint" if count == 1 else f"{count} endpoints"
    return f"{event['id']} {done}: {event['type']} to {to}\n\n{delivery_rows(event['deliveries'])}"


def delivery_summary(deliveries: Sequence[dict[str, Any]]) -> str | None:
    """'2 succeeded, 1 ready': how many deliveries are in each status (None: no delivery)."""
    counts = {status: sum(d["status"] == status for d in deliveries) for status in TASK_STATUSES}
    return ", ".join(f"{n} {status}" for status, n in counts.items() if n) or None


def event_rows(events: Sequence[dict[str, Any]]) -> str:
    return table(
        ["ID", "TYPE", "TENANT", "CREATED", "DELIVERIES"],
        [
            [e["id"], e["type"], e["tenant"], short_time(e["created_at"]), delivery_summary(e["deliveries"])]
            for e in events
        ],
    )


def payload(event: dict[str, Any]) -> str:
    """The payload as compact JSON (shortened), or its size when it is not JSON."""
    raw = base64.b64decode(event["payload_base64"])
    if event["payload"] is None and raw.strip() != b"null":
        return f"{len(raw)} bytes, not JSON (payload_base64 in --json)"
    return short_json(event["payload"])


def short_json(value: Any) -> str:
    """A JSON value as compact JSON, shortened to a line."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= _PAYLOAD_MAX else text[: _PAYLOAD_MAX - 1] + "… (--json shows it all)"


def event_detail(event: dict[str, Any]) -> str:
    summary = fields(
        [
            ("id", event["id"]), ("type", event["type"]), ("tenant", event["tenant"]), ("key", event["key"]),
            ("idempotency key", event["idempotency_key"]),
            ("labels", " ".join(f"{k}={v}" for k, v in (event.get("labels") or {}).items()) or None),
            ("run at", short_time(event["run_at"])),
            ("created", short_time(event["created_at"])), ("payload", payload(event)),
        ]
    )  # fmt: skip
    if not event["deliveries"]:
        return (
            summary + "\n\nno deliveries: none of its tenant's enabled endpoints took it (its type, "
            "its filter) when it was published, or those that did were deleted since"
        )
    return f"{summary}\n\n{delivery_rows(event['deliveries'])}"


# Bulk operations.

_BAR_WIDTH = 20


def filter_text(given: dict[str, Any]) -> str:
    """'queue=orders status=failed': an operation's filter as the API shows it."""
    return " ".join(f"{name}={value}" for name, value in given.items())


def operation_progress(operation: dict[str, Any]) -> str:
    """'[#########           ] 450/1000  changed 430  skipped 20': a running operation."""
    done, matched = operation["changed"] + operation["skipped"], operation["matched"]
    filled = _BAR_WIDTH * min(done, matched) // matched if matched else _BAR_WIDTH
    bar = "#" * filled + " " * (_BAR_WIDTH - filled)
    return f"[{bar}] {done}/{matched}  changed {operation['changed']}  skipped {operation['skipped']}"


def operation_summary(operation: dict[str, Any]) -> str:
    """'op_… succeeded: 1000 matched, 980 changed, 20 skipped' (and the error of a failed one)."""
    counts = f"{operation['matched']} matched, {operation['changed']} changed, {operation['skipped']} skipped"
    error = f"; {_cell(operation['error'], limit=None)}" if operation["error"] else ""
    return f"{operation['id']} {operation['state']}: {counts}{error}"


def operation_rows(operations: Sequence[dict[str, Any]]) -> str:
    return table(
        ["ID", "ACTION", "STATE", "MATCHED", "CHANGED", "SKIPPED", "CREATED", "FILTER"],
        [
            [
                o["id"], o["action"], o["state"], o["matched"], o["changed"], o["skipped"],
                short_time(o["created_at"]), filter_text(o["filter"]),
            ]
            for o in operations
        ],
    )  # fmt: skip


def operation_detail(operation: dict[str, Any]) -> str:
    return fields(
        [
            ("id", operation["id"]), ("action", operation["action"]), ("state", operation["state"]),
            ("filter", filter_text(operation["filter"])), ("matched", operation["matched"]),
            ("changed", operation["changed"]), ("skipped", operation["skipped"]),
            ("error", operation["error"]), ("created", short_time(operation["created_at"])),
            ("updated", short_time(operation["updated_at"])),
            ("finished", short_time(operation["finished_at"])),
        ]
    )  # fmt: skip
