"""PostgreSQL's webhook platform: endpoints and events (WebhookStore).

The queries are in sql/webhooks.sql; rules shared with SQLite are in storage/breakers.py
and storage/webhook_rows.py. ``publish_on`` and ``set_enabled_on`` run on a connection they
are given: schedules' firings publish inside their transactions, the breaker rules disable
endpoints inside the results' (postgres/breakers.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from workly.breaker import HELD_UNTIL
from workly.errors import EndpointInUse, EndpointNotFound, EventNotFound, TooManyEndpoints
from workly.json_text import to_json
from workly.storage import rows, webhook_rows
from workly.storage.contract import EndpointChange
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.statements import DECODERS, Connection, Connections, execute, fetch, fetchrow
from workly.storage.queries import PostgresQueries
from workly.storage.webhook_rows import check_none_running
from workly.webhooks import Endpoint, EndpointSpec, Event, NewEvent, Published


def types_of(value: Any) -> tuple[str, ...] | None:
    """An endpoint row's event_types, as this dialect keeps them."""
    return None if value is None else tuple(value)


def _endpoint(row: Any) -> Endpoint:
    return webhook_rows.endpoint_from_row(row, DECODERS, types_of)


@raises_workly_errors(interpret_postgres_error)
class PostgresWebhooks:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    # --- endpoints -----------------------------------------------------------------
    async def create_endpoint(self, endpoint_id: str, spec: EndpointSpec, now: datetime) -> Endpoint:
        q = self._q
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                if spec.tenant is not None:
                    await _take_tenant_slot(conn, q, spec.tenant, now)
                # A queue of that name may exist only if it is this endpoint's: ids are new.
                await execute(conn, q.put_queue, **rows.config_params(endpoint_id, spec.delivery, now))
                await execute(conn, q.insert_endpoint, **_endpoint_params(endpoint_id, spec, now))
                await execute(conn, q.insert_breakers, keys=[endpoint_id])
            return await self._read_endpoint(conn, endpoint_id)

    async def get_endpoint(self, endpoint_id: str) -> Endpoint | None:
        async with self._pool.acquire() as conn:
            row = await fetchrow(conn, self._q.get_endpoint, id=endpoint_id)
        return None if row is None else _endpoint(row)

    async def list_endpoints(
        self, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Endpoint], int | None]:
        page = rows.page_params(limit, before_seq)
        if tenant is None:
            found = await fetch(self._pool, self._q.list_endpoints, **page)
        else:
            found = await fetch(self._pool, self._q.list_endpoints_by_tenant, tenant=tenant, **page)
        shown, next_seq = rows.page(found, limit)
        return [_endpoint(row) for row in shown], next_seq

    async def update_endpoint(self, endpoint_id: str, change: EndpointChange, now: datetime) -> Endpoint:
        q = self._q
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                if await fetchrow(conn, q.lock_endpoint, id=endpoint_id) is None:
                    raise EndpointNotFound(endpoint_id)
                await execute(conn, q.get_queue_for_update, name=endpoint_id)  # as update_queue locks
                current = await self._read_endpoint(conn, endpoint_id)
                spec = change(current.spec)
                if spec.tenant != current.spec.tenant:
                    if await fetchrow(conn, q.endpoint_has_tasks, id=endpoint_id) is not None:
                        raise EndpointInUse(endpoint_id)
                    if spec.tenant is not None:
                        await _take_tenant_slot(conn, q, spec.tenant, now)
                await execute(conn, q.update_endpoint, **_endpoint_params(endpoint_id, spec, now))
                delivery = replace(spec.delivery, paused=not current.enabled)
                await execute(conn, q.update_queue, **rows.config_params(endpoint_id, delivery, now))
                if spec.url != current.spec.url:
                    await execute(conn, q.update_endpoint_task_urls, id=endpoint_id, url=spec.url)
            return await self._read_endpoint(conn, endpoint_id)

    async def delete_endpoint(self, endpoint_id: str, now: datetime) -> None:
        q = self._q
        async with self._pool.acquire() as conn, conn.transaction():
            if await fetchrow(conn, q.lock_endpoint, id=endpoint_id) is None:
                raise EndpointNotFound(endpoint_id)
            await execute(conn, q.retire_endpoint_queue, id=endpoint_id, now=now)
            await execute(conn, q.delete_pending_deliveries, id=endpoint_id)
            await execute(conn, q.delete_endpoint_row, id=endpoint_id)
            await execute(conn, q.delete_queue_if_empty, name=endpoint_id)
            await execute(conn, q.delete_queue_releases, queue=endpoint_id)
            await execute(conn, q.delete_breaker, key=endpoint_id)

    async def delete_event(self, event_id: str) -> int:
        q = self._q
        async with self._pool.acquire() as conn, conn.transaction():
            if await fetchrow(conn, q.lock_event, id=event_id) is None:
                raise EventNotFound(event_id)
            check_none_running(event_id, await fetch(conn, q.lock_event_deliveries, id=event_id))
            deleted: int = (await fetchrow(conn, q.delete_event_deliveries, id=event_id))["deleted"]
            await execute(conn, q.delete_event, id=event_id)
        return deleted

    async def set_endpoint_enabled(
        self, endpoint_id: str, enabled: bool, reason: str | None, now: datetime
    ) -> tuple[Endpoint, bool]:
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                changed = await set_enabled_on(conn, self._q, endpoint_id, enabled, reason, now)
            return await self._read_endpoint(conn, endpoint_id), changed

    async def recover_endpoint(self, endpoint_id: str, since: datetime, now: datetime) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            if await fetchrow(conn, self._q.lock_endpoint, id=endpoint_id) is None:
                raise EndpointNotFound(endpoint_id)
            recovered = await fetch(
                conn, self._q.recover_endpoint, id=endpoint_id, since=since, now=now, held_until=HELD_UNTIL
            )
            return len(recovered)

    async def _read_endpoint(self, conn: Connection, endpoint_id: str) -> Endpoint:
        row = await fetchrow(conn, self._q.get_endpoint, id=endpoint_id)
        if row is None:  # deleted by another request meanwhile
            raise EndpointNotFound(endpoint_id)
        return _endpoint(row)

    async def add_test_delivery(
        self, endpoint_id: str, task_id: str, body: bytes, headers: dict[str, str], now: datetime
    ) -> None:
        added = await fetch(
            self._pool, self._q.insert_test_delivery, task_id=task_id, endpoint_id=endpoint_id, body=body,
            headers=headers, now=now, held_until=HELD_UNTIL,
        )  # fmt: skip
        if not added:
            raise EndpointNotFound(endpoint_id)

    async def count_endpoints_by_state(self) -> dict[str, int]:
        return {row["state"]: row["n"] for row in await fetch(self._pool, self._q.count_endpoints_by_state)}

    # --- events --------------------------------------------------------------------
    async def publish(
        self, event: NewEvent, now: datetime, new_task_id: Callable[[], str], only_if_delivered: bool = False
    ) -> Published | None:
        async with self._pool.acquire() as conn:
            return await publish_on(conn, self._q, event, now, new_task_id, only_if_delivered)

    async def get_event(self, event_id: str) -> Event | None:
        async with self._pool.acquire() as conn:
            row = await fetchrow(conn, self._q.get_event, id=event_id)
            return None if row is None else (await read_events(conn, self._q, [row]))[0]

    async def list_events(
        self, event_type: str | None, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Event], int | None]:
        page = rows.page_params(limit, before_seq)
        async with self._pool.acquire() as conn:
            found = await fetch(conn, self._q.list_events, **page, type=event_type, tenant=tenant)
            shown, next_seq = rows.page(found, limit)
            return await read_events(conn, self._q, shown), next_seq


async def _take_tenant_slot(conn: Connection, q: PostgresQueries, tenant: str, now: datetime) -> None:
    """Make the tenant's row if it has none, and hold it until the endpoint is stored: two
    creations cannot both pass its ``max_endpoints``. TooManyEndpoints when it is full."""
    await execute(conn, q.ensure_tenant, tenant=tenant, now=now)
    limit = (await fetchrow(conn, q.lock_tenant, tenant=tenant))["max_endpoints"]
    if (
        limit is not None
        and (await fetchrow(conn, q.count_tenant_endpoints, tenant=tenant))["endpoints"] >= limit
    ):
        raise TooManyEndpoints(tenant, limit)


async def publish_on(
    conn: Connection, q: PostgresQueries, event: NewEvent, now: datetime, new_task_id: Callable[[], str],
    only_if_delivered: bool = False,
) -> Published | None:  # fmt: skip
    """publish's statements on ``conn`` (in the caller's transaction, if it has one)."""
    targets = webhook_rows.route(
        event,
        await (
            fetch(conn, q.publish_targets_untenanted)
            if event.tenant is None
            else fetch(conn, q.publish_targets, tenant=event.tenant)
        ),
        types_of,
    )
    if only_if_delivered and not targets:
        return None
    task_ids = [new_task_id() for _ in targets]
    headers = [
        to_json(webhook_rows.target_headers(row, event.type, event.content_type, DECODERS)) for row in targets
    ]
    labels = None if event.labels is None else to_json(event.labels)
    stored = await fetchrow(
        conn, q.publish_event, **webhook_rows.event_params(event, now, event.run_at, labels),
        held_until=HELD_UNTIL, task_ids=task_ids, endpoint_ids=[row["id"] for row in targets],
        urls=[row["url"] for row in targets], headers=headers,
        envelopes=[webhook_rows.wraps(row, event.type) for row in targets],
        enveloped=webhook_rows.enveloped(event, targets, now),
        traceparent=event.traceparent, tracestate=event.tracestate,
    )  # fmt: skip
    if stored["created"]:  # as stored: no need to read it back
        deliveries = [(row["id"], task_id) for row, task_id in zip(targets, task_ids, strict=True)]
        return Published(webhook_rows.new_event(event, now, deliveries), created=True)
    original = await fetchrow(
        conn, q.get_event_by_idempotency_key, tenant=event.tenant, key=event.idempotency_key
    )
    if original is None:  # the id was taken: an earlier try of this same request
        original = await fetchrow(conn, q.get_event, id=event.id)
    return Published((await read_events(conn, q, [original]))[0], created=False)


async def read_events(conn: Connection, q: PostgresQueries, found: Sequence[Any]) -> list[Event]:
    deliveries = await fetch(conn, q.event_deliveries, ids=[row["id"] for row in found])
    return [webhook_rows.event_from_row(row, deliveries, DECODERS) for row in found]


async def set_enabled_on(
    conn: Connection, q: PostgresQueries, endpoint_id: str, enabled: bool, reason: str | None, now: datetime
) -> bool:
    """Enable or disable an endpoint on ``conn``, in the caller's transaction; whether it changed."""
    if await fetchrow(conn, q.lock_endpoint, id=endpoint_id) is None:
        raise EndpointNotFound(endpoint_id)
    row = await fetchrow(conn, q.get_endpoint, id=endpoint_id)
    if enabled:  # a fresh start, even for one already enabled: its breaker closed, what it held free
        await execute(conn, q.reset_breaker, key=endpoint_id)
        await execute(conn, q.release_held_tasks, key=endpoint_id)
    if row["enabled"] == enabled:
        return False
    await execute(conn, q.set_endpoint_enabled, id=endpoint_id, enabled=enabled, reason=reason, now=now)
    await execute(conn, q.set_queue_paused, name=endpoint_id, paused=not enabled, now=now)
    return True


def _same(value: datetime) -> datetime:
    return value


def _endpoint_params(endpoint_id: str, spec: EndpointSpec, now: datetime) -> dict[str, Any]:
    types = None if spec.event_types is None else list(spec.event_types)
    # The dict itself: the pool's json codec encodes it (json.dumps here stored a JSON string).
    return webhook_rows.endpoint_params(endpoint_id, spec, now, types, spec.headers)
