"""PostgreSQL's schedules (ScheduleStore, workly/schedules.py); the queries are in
sql/schedules.sql.

A firing locks its schedule's row (FOR UPDATE; due ones SKIP LOCKED), stores what it makes
through the enqueue's and publish's statements (enqueue_on, publish_on) and moves the
schedule on, in one transaction, so concurrent schedulers in several processes make each
firing once."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any

from workly.errors import ScheduleNotFound
from workly.schedules import Fired, Schedule, ScheduleSpec
from workly.storage import rows
from workly.storage.contract import FiringPlan, ScheduleChange
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.enqueue import enqueue_on
from workly.storage.postgres.statements import DECODERS, Connection, Connections, execute, fetch, fetchrow
from workly.storage.postgres.webhooks import publish_on
from workly.storage.schedule_rows import advances, fired, schedule_from_row, spec_params


def _schedule(row: Any) -> Schedule:
    return schedule_from_row(row, DECODERS)


def _same(value: datetime) -> datetime:
    return value


@raises_workly_errors(interpret_postgres_error)
class PostgresSchedules:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def create_schedule(
        self, schedule_id: str, spec: ScheduleSpec, next_run_at: datetime | None, now: datetime
    ) -> Schedule:
        row = await fetchrow(
            self._pool, self._q.insert_schedule, id=schedule_id, now=now, **spec_params(spec, next_run_at)
        )
        return _schedule(row)

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        row = await fetchrow(self._pool, self._q.get_schedule, id=schedule_id)
        return None if row is None else _schedule(row)

    async def list_schedules(self, limit: int, before_seq: int | None) -> tuple[list[Schedule], int | None]:
        found = await fetch(self._pool, self._q.list_schedules, **rows.page_params(limit, before_seq))
        shown, next_seq = rows.page(found, limit)
        return [_schedule(row) for row in shown], next_seq

    async def update_schedule(self, schedule_id: str, change: ScheduleChange, now: datetime) -> Schedule:
        q = self._q
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                row = await fetchrow(conn, q.lock_schedule, id=schedule_id)
                if row is None:
                    raise ScheduleNotFound(schedule_id)
                spec, next_run_at = change(_schedule(row))
                await execute(
                    conn, q.update_schedule, id=schedule_id, now=now, **spec_params(spec, next_run_at)
                )
            row = await fetchrow(conn, q.get_schedule, id=schedule_id)
        if row is None:  # deleted right after the change
            raise ScheduleNotFound(schedule_id)
        return _schedule(row)

    async def delete_schedule(self, schedule_id: str) -> None:
        if not await fetch(self._pool, self._q.delete_schedule, id=schedule_id):
            raise ScheduleNotFound(schedule_id)

    async def fire_due_schedules(
        self, now: datetime, limit: int, plan: FiringPlan, new_task_id: Callable[[], str],
        skip: Collection[str] = (),
    ) -> list[Fired]:  # fmt: skip
        async with self._pool.acquire() as conn, conn.transaction():
            due = await fetch(conn, self._q.lock_due_schedules, now=now, limit=limit, skip=list(skip))
            return await self._fire(conn, [_schedule(row) for row in due], now, plan, new_task_id)

    async def trigger_schedule(
        self, schedule_id: str, now: datetime, plan: FiringPlan, new_task_id: Callable[[], str]
    ) -> tuple[Fired, Schedule]:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await fetchrow(conn, self._q.lock_schedule, id=schedule_id)
            if row is None:
                raise ScheduleNotFound(schedule_id)
            [made] = await self._fire(conn, [_schedule(row)], now, plan, new_task_id)
            return made, _schedule(await fetchrow(conn, self._q.get_schedule, id=schedule_id))

    async def next_schedule_at(self, skip: Collection[str] = ()) -> datetime | None:
        row = await fetchrow(self._pool, self._q.next_schedule_at, skip=list(skip))
        assert row is not None, "an aggregate has a row"
        value: datetime | None = row["next_run_at"]
        return value

    async def _fire(
        self, conn: Connection, schedules: Sequence[Schedule], now: datetime, plan: FiringPlan,
        new_task_id: Callable[[], str],
    ) -> list[Fired]:  # fmt: skip
        """Store what each firing makes (every task in one enqueue) and move each schedule on."""
        firings = [(schedule, firing) for schedule in schedules if (firing := plan(schedule)) is not None]
        tasks = [firing.task for _, firing in firings if firing.task is not None]
        stored = await enqueue_on(conn, self._q, tasks, now) if tasks else []
        enqueued = dict(zip([t.id for t in tasks], stored, strict=True))
        made = []
        for schedule, firing in firings:
            published = None
            if firing.event is not None:
                published = await publish_on(conn, self._q, firing.event, now, new_task_id)
            task_entry = None if firing.task is None else enqueued[firing.task.id]
            made.append((fired(schedule.id, firing, task_entry, published), firing))
        if made:
            advanced = advances(made, _same)
            await execute(
                conn, self._q.advance_schedules, ids=[r["id"] for r in advanced],
                next_run_ats=[r["next_run_at"] for r in advanced], fire_ats=[r["fire_at"] for r in advanced],
                task_ids=[r["task_id"] for r in advanced], event_ids=[r["event_id"] for r in advanced],
            )  # fmt: skip
        return [fired_one for fired_one, _ in made]
