"""SQLite's schedules (ScheduleStore, workly/schedules.py); the queries are in
sql/schedules.sql.

A firing runs inside one BEGIN
IMMEDIATE transaction on the writer: reading the due schedules, storing what they make and
moving them on commit together, and no other writer (of any process) comes in between."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Sequence
from datetime import datetime

from workly.errors import ScheduleNotFound
from workly.json_text import to_json
from workly.schedules import Fired, Schedule, ScheduleSpec
from workly.storage import rows
from workly.storage.contract import FiringPlan, ScheduleChange
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import sqlite_queries
from workly.storage.schedule_rows import advances, fired, schedule_from_row, spec_params
from workly.storage.sqlite.enqueue import enqueue_on
from workly.storage.sqlite.statements import (
    DECODERS,
    Connections,
    SqliteRow,
    execute,
    fetchall,
    fetchone,
    from_us,
    to_us,
)
from workly.storage.sqlite.webhooks import publish_on

Db = sqlite3.Connection
_q = sqlite_queries


def _schedule(row: SqliteRow) -> Schedule:
    return schedule_from_row(row, DECODERS)


def _us_or_null(value: datetime | None) -> int | None:
    return None if value is None else to_us(value)


@raises_workly_errors(interpret_sqlite_error)
class SqliteSchedules:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def create_schedule(
        self, schedule_id: str, spec: ScheduleSpec, next_run_at: datetime | None, now: datetime
    ) -> Schedule:
        params = {"id": schedule_id, "now": to_us(now), **spec_params(spec, _us_or_null(next_run_at))}
        # fetchall: a RETURNING statement must run to its end before the COMMIT.
        [row] = await self._writer.transaction(self._acknowledged, fetchall, _q().insert_schedule, params)
        return _schedule(row)

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        row = await self._reader.run(fetchone, _q().get_schedule, {"id": schedule_id})
        return None if row is None else _schedule(row)

    async def list_schedules(self, limit: int, before_seq: int | None) -> tuple[list[Schedule], int | None]:
        found = await self._reader.run(fetchall, _q().list_schedules, rows.page_params(limit, before_seq))
        shown, next_seq = rows.page(found, limit)
        return [_schedule(row) for row in shown], next_seq

    async def update_schedule(self, schedule_id: str, change: ScheduleChange, now: datetime) -> Schedule:
        return await self._writer.transaction(
            self._acknowledged, _update_schedule, schedule_id, change, to_us(now)
        )

    async def delete_schedule(self, schedule_id: str) -> None:
        deleted = await self._writer.transaction(
            self._acknowledged, fetchall, _q().delete_schedule, {"id": schedule_id}
        )
        if not deleted:
            raise ScheduleNotFound(schedule_id)

    async def fire_due_schedules(
        self, now: datetime, limit: int, plan: FiringPlan, new_task_id: Callable[[], str],
        skip: Collection[str] = (),
    ) -> list[Fired]:  # fmt: skip
        # Durable like an acknowledged enqueue, not like a claim: a firing that a power loss
        # rolled back would be made again as another task, under another webhook-id, though
        # its first task may have been delivered already.
        return await self._writer.transaction(
            self._acknowledged, _fire_due, to_us(now), limit, plan, new_task_id, to_json(list(skip))
        )

    async def trigger_schedule(
        self, schedule_id: str, now: datetime, plan: FiringPlan, new_task_id: Callable[[], str]
    ) -> tuple[Fired, Schedule]:
        return await self._writer.transaction(
            self._acknowledged, _trigger, schedule_id, to_us(now), plan, new_task_id
        )

    async def next_schedule_at(self, skip: Collection[str] = ()) -> datetime | None:
        row = await self._reader.run(fetchone, _q().next_schedule_at, {"skip": to_json(list(skip))})
        assert row is not None, "an aggregate has a row"
        return None if row["next_run_at"] is None else from_us(row["next_run_at"])


def _update_schedule(db: Db, schedule_id: str, change: ScheduleChange, now_us: int) -> Schedule:
    row = fetchone(db, _q().lock_schedule, {"id": schedule_id})
    if row is None:
        raise ScheduleNotFound(schedule_id)
    spec, next_run_at = change(_schedule(row))
    params = {"id": schedule_id, "now": now_us, **spec_params(spec, _us_or_null(next_run_at))}
    execute(db, _q().update_schedule, params)
    return _read_schedule(db, schedule_id)


def _read_schedule(db: Db, schedule_id: str) -> Schedule:
    """A schedule this transaction holds (it cannot have gone)."""
    row = fetchone(db, _q().get_schedule, {"id": schedule_id})
    assert row is not None
    return _schedule(row)


def _fire_due(
    db: Db, now_us: int, limit: int, plan: FiringPlan, new_task_id: Callable[[], str], skip: str
) -> list[Fired]:
    due = fetchall(db, _q().lock_due_schedules, {"now": now_us, "limit": limit, "skip": skip})
    return _fire(db, [_schedule(row) for row in due], now_us, plan, new_task_id)


def _trigger(
    db: Db, schedule_id: str, now_us: int, plan: FiringPlan, new_task_id: Callable[[], str]
) -> tuple[Fired, Schedule]:
    row = fetchone(db, _q().lock_schedule, {"id": schedule_id})
    if row is None:
        raise ScheduleNotFound(schedule_id)
    [made] = _fire(db, [_schedule(row)], now_us, plan, new_task_id)
    return made, _read_schedule(db, schedule_id)


def _fire(
    db: Db, schedules: Sequence[Schedule], now_us: int, plan: FiringPlan, new_task_id: Callable[[], str]
) -> list[Fired]:
    """Store what each firing makes (every task in one enqueue) and move each schedule on."""
    firings = [(schedule, firing) for schedule in schedules if (firing := plan(schedule)) is not None]
    tasks = [firing.task for _, firing in firings if firing.task is not None]
    stored = enqueue_on(db, tasks, now_us) if tasks else []
    enqueued = dict(zip([t.id for t in tasks], stored, strict=True))
    made = []
    for schedule, firing in firings:
        published = None
        if firing.event is not None:
            published = publish_on(db, firing.event, now_us, new_task_id, False)
        task_entry = None if firing.task is None else enqueued[firing.task.id]
        made.append((fired(schedule.id, firing, task_entry, published), firing))
    if made:
        execute(db, _q().advance_schedules, {"advances": to_json(advances(made, to_us))})
    return [fired_one for fired_one, _ in made]
