"""SQLite's webhook platform: endpoints and events (WebhookStore).

The queries are in sql/webhooks.sql; rules shared with PostgreSQL are in
storage/breakers.py and storage/webhook_rows.py. Each function below runs on a connection
thread, writes inside one BEGIN IMMEDIATE transaction; ``publish_on`` and
``set_enabled_on`` also inside a schedule's firing and the results' (sqlite/breakers.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from workly.errors import EndpointInUse, EndpointNotFound, EventNotFound, TooManyEndpoints
from workly.json_text import from_json, to_json
from workly.storage import rows, webhook_rows
from workly.storage.contract import EndpointChange
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import (
    DECODERS,
    HELD_US,
    Connections,
    SqliteRow,
    execute,
    execute_many,
    fetchall,
    fetchone,
    to_us,
)
from workly.storage.webhook_rows import check_none_running
from workly.webhooks import Endpoint, EndpointSpec, Event, NewEvent, Published

Db = sqlite3.Connection
_q = sqlite_queries


def types_of(value: Any) -> tuple[str, ...] | None:
    """An endpoint row's event_types, as this dialect keeps them."""
    return None if value is None else tuple(from_json(value))


@raises_workly_errors(interpret_sqlite_error)
class SqliteWebhooks:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def create_endpoint(self, endpoint_id: str, spec: EndpointSpec, now: datetime) -> Endpoint:
        return await self._writer.transaction(
            self._acknowledged, _create_endpoint, endpoint_id, spec, to_us(now)
        )

    async def get_endpoint(self, endpoint_id: str) -> Endpoint | None:
        return await self._reader.run(_get_endpoint, endpoint_id)

    async def list_endpoints(
        self, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Endpoint], int | None]:
        return await self._reader.run(_list_endpoints, tenant, limit, before_seq)

    async def update_endpoint(self, endpoint_id: str, change: EndpointChange, now: datetime) -> Endpoint:
        return await self._writer.transaction(
            self._acknowledged, _update_endpoint, endpoint_id, change, to_us(now)
        )

    async def delete_endpoint(self, endpoint_id: str, now: datetime) -> None:
        await self._writer.transaction(self._acknowledged, _delete_endpoint, endpoint_id, to_us(now))

    async def delete_event(self, event_id: str) -> int:
        return await self._writer.transaction(self._acknowledged, _delete_event, event_id)

    async def set_endpoint_enabled(
        self, endpoint_id: str, enabled: bool, reason: str | None, now: datetime
    ) -> tuple[Endpoint, bool]:
        return await self._writer.transaction(
            self._acknowledged, _set_endpoint_enabled, endpoint_id, enabled, reason, to_us(now)
        )

    async def recover_endpoint(self, endpoint_id: str, since: datetime, now: datetime) -> int:
        return await self._writer.transaction(
            self._acknowledged, _recover_endpoint, endpoint_id, to_us(since), to_us(now)
        )

    async def publish(
        self, event: NewEvent, now: datetime, new_task_id: Callable[[], str], only_if_delivered: bool = False
    ) -> Published | None:
        return await self._writer.transaction(
            self._acknowledged, publish_on, event, to_us(now), new_task_id, only_if_delivered
        )

    async def add_test_delivery(
        self, endpoint_id: str, task_id: str, body: bytes, headers: dict[str, str], now: datetime
    ) -> None:
        params = {"task_id": task_id, "endpoint_id": endpoint_id, "body": body, "headers": to_json(headers),
                  "now": to_us(now), "held_until": HELD_US}  # fmt: skip
        if not await self._writer.transaction(
            self._acknowledged, fetchall, _q().insert_test_delivery, params
        ):
            raise EndpointNotFound(endpoint_id)

    async def count_endpoints_by_state(self) -> dict[str, int]:
        found = await self._reader.run(fetchall, _q().count_endpoints_by_state)
        return {row["state"]: row["n"] for row in found}

    async def get_event(self, event_id: str) -> Event | None:
        return await self._reader.run(_get_event, event_id)

    async def list_events(
        self, event_type: str | None, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Event], int | None]:
        return await self._reader.run(_list_events, event_type, tenant, limit, before_seq)


# --- endpoints ------------------------------------------------------------------------
def _endpoint_params(endpoint_id: str, spec: EndpointSpec, now_us: int) -> dict[str, Any]:
    types = None if spec.event_types is None else to_json(list(spec.event_types))
    params = webhook_rows.endpoint_params(endpoint_id, spec, now_us, types, to_json(spec.headers))
    del params["filter_path"]  # PostgreSQL's: only its SQL publish_event evaluates filters in SQL
    return params


def _create_endpoint(db: Db, endpoint_id: str, spec: EndpointSpec, now_us: int) -> Endpoint:
    if spec.tenant is not None:
        _take_tenant_slot(db, spec.tenant, now_us)
    execute(db, _q().put_queue, rows.config_params(endpoint_id, spec.delivery, now_us))
    execute(db, _q().insert_endpoint, _endpoint_params(endpoint_id, spec, now_us))
    execute(db, _q().insert_breakers, {"keys": to_json([endpoint_id])})
    return _read_endpoint(db, endpoint_id)


def _take_tenant_slot(db: Db, tenant: str, now_us: int) -> None:
    """Make the tenant's row if it has none; TooManyEndpoints when it has its
    ``max_endpoints`` already (one writer: nothing comes in between)."""
    execute(db, _q().ensure_tenant, {"tenant": tenant, "now": now_us})
    row = fetchone(db, _q().lock_tenant, {"tenant": tenant})
    assert row is not None, "made above"
    limit = row["max_endpoints"]
    if (
        limit is not None
        and fetchall(db, _q().count_tenant_endpoints, {"tenant": tenant})[0]["endpoints"] >= limit
    ):
        raise TooManyEndpoints(tenant, limit)


def _get_endpoint(db: Db, endpoint_id: str) -> Endpoint | None:
    row = fetchone(db, _q().get_endpoint, {"id": endpoint_id})
    return None if row is None else _endpoint(row)


def _read_endpoint(db: Db, endpoint_id: str) -> Endpoint:
    found = _get_endpoint(db, endpoint_id)
    if found is None:
        raise EndpointNotFound(endpoint_id)
    return found


def _endpoint(row: SqliteRow) -> Endpoint:
    return webhook_rows.endpoint_from_row(row, DECODERS, types_of)


def _list_endpoints(
    db: Db, tenant: str | None, limit: int, before_seq: int | None
) -> tuple[list[Endpoint], int | None]:
    page = rows.page_params(limit, before_seq)
    if tenant is None:
        found = fetchall(db, _q().list_endpoints, page)
    else:
        found = fetchall(db, _q().list_endpoints_by_tenant, {**page, "tenant": tenant})
    shown, next_seq = rows.page(found, limit)
    return [_endpoint(row) for row in shown], next_seq


def _update_endpoint(db: Db, endpoint_id: str, change: EndpointChange, now_us: int) -> Endpoint:
    current = _read_endpoint(db, endpoint_id)
    spec = change(current.spec)
    if spec.tenant != current.spec.tenant:
        if fetchone(db, _q().endpoint_has_tasks, {"id": endpoint_id}) is not None:
            raise EndpointInUse(endpoint_id)
        if spec.tenant is not None:
            _take_tenant_slot(db, spec.tenant, now_us)
    execute(db, _q().update_endpoint, _endpoint_params(endpoint_id, spec, now_us))
    delivery = replace(spec.delivery, paused=not current.enabled)
    execute(db, _q().update_queue, rows.config_params(endpoint_id, delivery, now_us))
    if spec.url != current.spec.url:
        execute(db, _q().update_endpoint_task_urls, {"id": endpoint_id, "url": spec.url})
    return _read_endpoint(db, endpoint_id)


def _delete_endpoint(db: Db, endpoint_id: str, now_us: int) -> None:
    if fetchone(db, _q().lock_endpoint, {"id": endpoint_id}) is None:
        raise EndpointNotFound(endpoint_id)
    execute(db, _q().retire_endpoint_queue, {"id": endpoint_id, "now": now_us})
    execute(db, _q().delete_pending_deliveries, {"id": endpoint_id})
    execute(db, _q().delete_endpoint_row, {"id": endpoint_id})
    execute(db, _q().delete_queue_if_empty, {"name": endpoint_id})
    execute(db, _q().delete_breaker, {"key": endpoint_id})


def _delete_event(db: Db, event_id: str) -> int:
    if fetchone(db, _q().lock_event, {"id": event_id}) is None:
        raise EventNotFound(event_id)
    check_none_running(event_id, fetchall(db, _q().lock_event_deliveries, {"id": event_id}))
    execute(db, _q().delete_event_deliveries_callbacks, {"id": event_id})
    deleted = len(fetchall(db, _q().delete_event_deliveries, {"id": event_id}))
    execute(db, _q().delete_event, {"id": event_id})
    return deleted


def _set_endpoint_enabled(
    db: Db, endpoint_id: str, enabled: bool, reason: str | None, now_us: int
) -> tuple[Endpoint, bool]:
    changed = set_enabled_on(db, endpoint_id, enabled, reason, now_us)
    return _read_endpoint(db, endpoint_id), changed


def set_enabled_on(db: Db, endpoint_id: str, enabled: bool, reason: str | None, now_us: int) -> bool:
    """Enable or disable an endpoint, in the caller's transaction; whether it changed."""
    row = fetchone(db, _q().get_endpoint, {"id": endpoint_id})
    if row is None:
        raise EndpointNotFound(endpoint_id)
    if enabled:  # a fresh start, even for one already enabled: its breaker closed, what it held free
        execute(db, _q().reset_breaker, {"key": endpoint_id})
        execute(db, _q().release_held_tasks, {"key": endpoint_id})
    if bool(row["enabled"]) == enabled:
        return False
    execute(
        db,
        _q().set_endpoint_enabled,
        {"id": endpoint_id, "enabled": enabled, "reason": reason, "now": now_us},
    )
    execute(db, _q().set_queue_paused, {"name": endpoint_id, "paused": not enabled, "now": now_us})
    return True


def _recover_endpoint(db: Db, endpoint_id: str, since_us: int, now_us: int) -> int:
    if fetchone(db, _q().lock_endpoint, {"id": endpoint_id}) is None:
        raise EndpointNotFound(endpoint_id)
    params = {"id": endpoint_id, "since": since_us, "now": now_us, "held_until": HELD_US}
    return len(fetchall(db, _q().recover_endpoint, params))


# --- events ---------------------------------------------------------------------------
def publish_on(
    db: Db, event: NewEvent, now_us: int, new_task_id: Callable[[], str], only_if_delivered: bool
) -> Published | None:
    run_us = now_us if event.run_at is None else to_us(event.run_at)
    labels = None if event.labels is None else to_json(event.labels)
    params = webhook_rows.event_params(event, now_us, run_us, labels)
    targets = webhook_rows.route(
        event,
        fetchall(db, _q().publish_targets_untenanted)
        if event.tenant is None
        else fetchall(db, _q().publish_targets, {"tenant": event.tenant}),
        types_of,
    )
    if only_if_delivered and not targets:
        return None
    if not fetchall(db, _q().publish_event, params):
        original = None
        if event.idempotency_key is not None:
            original = fetchone(
                db, _q().get_event_by_idempotency_key, {"tenant": event.tenant, "key": event.idempotency_key}
            )
        if original is None:  # the id was taken: an earlier try of this same request
            original = fetchone(db, _q().get_event, {"id": event.id})
        assert original is not None
        return Published(_events(db, [original])[0], created=False)
    if event.tenant is not None:  # a tenant named for the first time gets its row
        execute(db, _q().ensure_tenant, {"tenant": event.tenant, "now": now_us})
    task_ids = [new_task_id() for _ in targets]
    enveloped = webhook_rows.enveloped(event, targets, DECODERS.time(now_us))
    execute_many(
        db,
        _q().publish_event_deliveries,
        [
            {
                "task_id": task_id,
                "endpoint_id": row["id"],
                "url": row["url"],
                "headers": to_json(
                    webhook_rows.target_headers(row, event.type, event.content_type, DECODERS)
                ),
                "payload": enveloped if webhook_rows.wraps(row, event.type) else event.payload,
                "held_until": HELD_US,
                "run_at": run_us,
                "key": event.key,
                "now": now_us,
                "event_id": event.id,
                "callback_url": event.callback_url,
                "failure_callback_url": event.failure_callback_url,
                "traceparent": event.traceparent,
                "tracestate": event.tracestate,
            }
            for row, task_id in zip(targets, task_ids, strict=True)
        ],
    )
    deliveries = [(row["id"], task_id) for row, task_id in zip(targets, task_ids, strict=True)]
    return Published(webhook_rows.new_event(event, DECODERS.time(now_us), deliveries), created=True)


def _get_event(db: Db, event_id: str) -> Event | None:
    row = fetchone(db, _q().get_event, {"id": event_id})
    return None if row is None else _events(db, [row])[0]


def _list_events(
    db: Db, event_type: str | None, tenant: str | None, limit: int, before_seq: int | None
) -> tuple[list[Event], int | None]:
    params = {**rows.page_params(limit, before_seq), "type": event_type, "tenant": tenant}
    shown, next_seq = rows.page(fetchall(db, _q().list_events, params), limit)
    return _events(db, shown), next_seq


def _events(db: Db, found: Sequence[SqliteRow]) -> list[Event]:
    deliveries = fetchall(db, _q().event_deliveries, {"ids": to_json([row["id"] for row in found])})
    return [webhook_rows.event_from_row(row, deliveries, DECODERS) for row in found]
