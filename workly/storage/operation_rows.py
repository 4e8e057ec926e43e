"""Rows of bulk operations and due callbacks as domain objects, for both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workly.callbacks import DueCallback
from workly.json_text import from_json, to_json
from workly.lifecycle import tenant_hash
from workly.operations import Operation, TaskFilter, filter_from_json
from workly.storage.rows import Decoders, Row, attempt_from_row, task_from_row


def operation_from_row(row: Row, dec: Decoders) -> Operation:
    stored = row["filter"]
    return Operation(
        id=row["id"],
        action=row["action"],
        filter=filter_from_json(from_json(stored) if isinstance(stored, str) else dict(stored)),
        state=row["state"],
        matched=row["matched"],
        changed=row["changed"],
        skipped=row["skipped"],
        created_at=dec.time(row["created_at"]),
        updated_at=dec.time(row["updated_at"]),
        finished_at=None if row["finished_at"] is None else dec.time(row["finished_at"]),
        error=row["error"],
    )


def hashed(tenant: str, stored: Any = None) -> str:
    """A filter as stored (JSON text; ``stored``: the one kept, else ``{"tenant"}``) with the
    tenant replaced by its hash: how operations name an erased tenant."""
    shown = {} if stored is None else from_json(stored) if isinstance(stored, str) else dict(stored)
    return to_json({**shown, "tenant": tenant_hash(tenant)})


def filter_params(task_filter: TaskFilter, time: Callable[[Any], Any]) -> dict[str, Any]:
    """The filter as the queries' parameters (NULL: any), times as the dialect keeps them."""
    return {
        "queue": task_filter.queue,
        "endpoint_id": task_filter.endpoint_id,
        "event_type": task_filter.event_type,
        "tenant": task_filter.tenant,
        "key": task_filter.key,
        "status": task_filter.status,
        "created_after": None if task_filter.created_after is None else time(task_filter.created_after),
        "created_before": None if task_filter.created_before is None else time(task_filter.created_before),
        "last_status_code": task_filter.last_status_code,
    }


def due_callback_from_row(row: Row, dec: Decoders) -> DueCallback:
    """A due_callbacks row: the task (task_view's columns) and its last attempt (a_*)."""
    task = task_from_row(row, dec)
    attempt = None if row["a_attempt"] is None else attempt_from_row(row, dec, prefix="a_", task_id=task.id)
    return DueCallback(task, attempt, row["callback_seq"])
