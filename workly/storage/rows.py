"""Mapping database rows to domain objects, shared by both backends.

Each backend passes its own decoders for the types the dialects store differently
(times, header JSON, booleans); the field mapping itself lives here once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar, cast

from workly.models import TASK_STATUSES, Attempt, ClaimedTask, Queue, QueueConfig, Task, TaskStatus

MAX_SEQ = 2**63 - 1  # sequences are signed 64-bit in both databases
R = TypeVar("R")


class Row(Protocol):
    """A result row read by column name: asyncpg's Record and the SQLite storage's dict both are."""

    def __getitem__(self, key: str, /) -> Any: ...

    def get(self, key: str, /) -> Any: ...


class Decoders:
    def __init__(self, time: Callable[[Any], datetime], headers: Callable[[Any], dict[str, str]]) -> None:
        self.time = time
        self.headers = headers


def stop_on_text(stop_on: Sequence[str] | None) -> str | None:
    """A stop_on list as both dialects store it: comma separated."""
    return None if stop_on is None else ",".join(stop_on)


def stop_on_from_text(text: str) -> tuple[str, ...]:
    return tuple(text.split(",")) if text else ()


def deadline_at(row: Row, dec: Decoders) -> datetime | None:
    """When a claimed task's deadline passes: its budget start plus its deadline."""
    if row["deadline"] is None:
        return None
    return dec.time(row["budget_at"]) + timedelta(seconds=float(row["deadline"]))


def task_from_row(row: Row, dec: Decoders) -> Task:
    return Task(
        id=row["id"],
        queue=row["queue"],
        status=row["status"],
        url=row["url"],
        method=row["method"],
        headers=dec.headers(row["headers"]),
        body=bytes(row["body"]),
        run_at=dec.time(row["run_at"]),
        priority=row["priority"],
        key=row["key"],
        tenant=row["tenant"],
        idempotency_key=row["idempotency_key"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        timeout=float(row["timeout"]),
        last_status_code=row["last_status_code"],
        last_error=row["last_error"],
        created_at=dec.time(row["created_at"]),
        updated_at=dec.time(row["updated_at"]),
        event_id=row["event_id"],
        endpoint_id=row["endpoint_id"],
        stop_on=stop_on_from_text(row["stop_on"]),
        deadline=None if row["deadline"] is None else float(row["deadline"]),
        min_backoff=float(row["min_backoff"]),
        max_backoff=float(row["max_backoff"]),
        callback_url=row["callback_url"],
        failure_callback_url=row["failure_callback_url"],
        callback_of=row["callback_of"],
        test=bool(row.get("test")),  # enqueue answers leave it out: a new task is no test
        lease_holder=row["lease_holder"],
        lease_expires_at=None if row["lease_expires_at"] is None else dec.time(row["lease_expires_at"]),
    )


def claimed_from_row(row: Row, dec: Decoders, lease_token: str) -> ClaimedTask:
    return ClaimedTask(
        seq=row["seq"],
        id=row["id"],
        queue=row["queue"],
        url=row["url"],
        method=row["method"],
        headers=dec.headers(row["headers"]),
        body=bytes(row["body"]),
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        timeout=float(row["timeout"]),
        min_backoff=float(row["min_backoff"]),
        max_backoff=float(row["max_backoff"]),
        lease_token=lease_token,
        signing_secret=row["signing_secret"],
        due_at=dec.time(row["run_at"]),
        event_id=row["event_id"],
        endpoint_id=row["endpoint_id"],
        breaker=row["breaker"],
        attempt_base=row["attempt_base"],
        stop_on=stop_on_from_text(row["stop_on"]),
        deadline_at=deadline_at(row, dec),
        capture_response=bool(row["capture_response"]),
        traceparent=row["traceparent"],
        tracestate=row["tracestate"],
    )


def attempt_from_row(row: Row, dec: Decoders, prefix: str = "", task_id: str | None = None) -> Attempt:
    """An attempt row's columns, named ``<prefix><column>`` (a query that reads a task and
    its attempt in one row prefixes the attempt's); ``task_id`` when the row does not say."""
    started = dec.time(row[f"{prefix}started_at"])
    finished = dec.time(row[f"{prefix}finished_at"])
    return Attempt(
        task_id=row["task_id"] if task_id is None else task_id,
        attempt=row[f"{prefix}attempt"],
        started_at=started,
        finished_at=finished,
        status_code=row[f"{prefix}status_code"],
        error=row[f"{prefix}error"],
        duration_ms=round((finished - started).total_seconds() * 1000, 3),
        response=bytes(row[f"{prefix}response"]),
        stale=bool(row[f"{prefix}stale"]),
    )


def queue_config_from_row(row: Row) -> QueueConfig:
    return QueueConfig(
        max_concurrency=row["max_concurrency"],
        rate_limit=row["rate_limit"],
        max_attempts=row["max_attempts"],
        min_backoff=float(row["min_backoff"]),
        max_backoff=float(row["max_backoff"]),
        timeout=float(row["timeout"]),
        ordering=row["ordering"],
        paused=bool(row["paused"]),
        signing_secret=row["signing_secret"],
        stop_on=stop_on_from_text(row["stop_on"]),
        deadline=None if row["deadline"] is None else float(row["deadline"]),
        retention=row["retention"],
    )


def queue_from_row(row: Row, counts: Mapping[str, int], dec: Decoders) -> Queue:
    return Queue(
        name=row["name"],
        config=queue_config_from_row(row),
        counts=cast(dict[TaskStatus, int], dict(counts)),
        created_at=dec.time(row["created_at"]),
        updated_at=dec.time(row["updated_at"]),
    )


def counts_by_queue(rows: Sequence[Row]) -> dict[str, dict[str, int]]:
    """``count_tasks`` rows → {queue: {status: n}} with every status present."""
    result: dict[str, dict[str, int]] = {}
    for row in rows:
        per_status = result.setdefault(row["queue"], dict.fromkeys(TASK_STATUSES, 0))
        per_status[row["status"]] = row["n"]
    return result


def empty_counts() -> dict[str, int]:
    return dict.fromkeys(TASK_STATUSES, 0)


def page_params(limit: int, before_seq: int | None) -> dict[str, int]:
    """A list page's parameters: ``limit`` + 1 rows (the extra says whether more follow)
    before ``before_seq`` (None: from the newest)."""
    return {"before": MAX_SEQ if before_seq is None else before_seq, "limit": limit + 1}


def page(found: Sequence[R], limit: int) -> tuple[list[R], int | None]:
    """A page read with ``page_params``: its rows, and the seq the next page starts before
    (None: this was the last)."""
    next_seq: int | None = cast(Any, found[limit - 1])["seq"] if len(found) > limit else None
    return list(found[:limit]), next_seq


def config_params(name: str, config: QueueConfig, now: Any) -> dict[str, Any]:
    """put_queue's and update_queue's parameters; ``now`` as the dialect stores times."""
    return {**asdict(config), "stop_on": stop_on_text(config.stop_on), "name": name, "now": now}
