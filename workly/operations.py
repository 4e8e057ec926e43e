"""Bulk operations: retry or cancel every task a filter matches (docs/failures.md).

An operation is stored when it is asked for and worked through by a runner in the
service (service/operation_runner.py), in chunks of at most ``CHUNK`` tasks, each chunk and the
operation's progress in one transaction: a restart resumes after the last chunk that
committed, and no task is changed twice. It covers the tasks that existed when it was
created (seq up to ``upto_seq``); tasks enqueued later are not its business.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

from workly.models import TaskStatus
from workly.task_json import time_text

Action = Literal["retry", "cancel", "replay", "erase"]
OperationState = Literal["running", "succeeded", "failed"]
# What POST /v1/operations asks for; a replay is asked for through its endpoint
# (POST /v1/endpoints/{id}/replay) and goes through events, not tasks (docs/webhooks.md);
# an erase through its tenant (DELETE /v1/tenants/{tenant}, docs/retention.md).
ACTIONS: tuple[Action, ...] = ("retry", "cancel")
ENDPOINT_GONE = "the endpoint was deleted while its replay ran"  # a replay's error then
CHUNK = 1000  # tasks per transaction: short enough that claims and enqueues never wait long
# The statuses each action changes; a matched task in any other status is skipped.
CHANGES_FROM: dict[Action, tuple[TaskStatus, ...]] = {
    "retry": ("failed", "canceled"),
    "cancel": ("ready",),
    "replay": (),
    "erase": (),
}


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which tasks an operation covers: every field given must match (at least one is)."""

    queue: str | None = None
    endpoint_id: str | None = None
    event_type: str | None = None
    tenant: str | None = None
    key: str | None = None
    status: TaskStatus | None = None
    created_after: datetime | None = None  # created at or after
    created_before: datetime | None = None  # created before
    last_status_code: int | None = None

    def given(self) -> dict[str, Any]:
        """The fields that are set, times as RFC 3339 (how the API shows a filter and the
        storage keeps it)."""
        shown = {}
        for name, value in asdict(self).items():
            if value is not None:
                shown[name] = time_text(value) if isinstance(value, datetime) else value
        return shown

    def is_empty(self) -> bool:
        return not self.given()


def filter_from_json(data: dict[str, Any]) -> TaskFilter:
    """A filter as ``given`` wrote it."""
    fields = dict(data)
    for name in ("created_after", "created_before"):
        if fields.get(name) is not None:
            fields[name] = datetime.fromisoformat(fields[name])
    return TaskFilter(**fields)


@dataclass(frozen=True, slots=True)
class Operation:
    id: str
    action: Action
    filter: TaskFilter
    state: OperationState
    matched: int  # tasks the filter matched when it was created (then: changed + skipped)
    changed: int
    skipped: int  # matched, but not in a status the action changes (or gone meanwhile)
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ChunkDone:
    """What one chunk of an operation did."""

    operation: Operation
    changed: int  # tasks this chunk changed (a retry's are claimable now)
