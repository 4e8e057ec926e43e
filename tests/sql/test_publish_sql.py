"""publish_event in the application's own transactions, against a real `workly serve`.

Endpoints are registered through the API, with URLs on a receiver on 127.0.0.1; the
application publishes with ``SELECT workly.publish_event(...)`` on its own connection
(default search_path). A committed event reaches each enabled endpoint of its tenant that
subscribes to its type, once, signed with that endpoint's secret, with webhook-id = the
event id; a rolled-back one reaches nobody and leaves nothing; an idempotency key gives
one event; a refused call raises SQLSTATE 22023 naming the field. The waits are on what can
be seen (the receiver, the API, the tables); none is a sleep.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.e2e.conftest import create_endpoint, drop_workly_env, serve_args
from tests.sql.conftest import SCHEMA
from tests.support.receiver import Received, Receiver, _verify, running_receiver
from tests.support.servers import TEST_SECRET, TEST_SERVER_ENV, api_client, free_port, workly_process

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

PUBLISH = "SELECT workly.publish_event(type => $1, payload => $2::jsonb, tenant => $3, idempotency_key => $4)"


@pytest.fixture
def workly_url(app_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`workly serve` on ``app_db``, in schema ``workly``; stopped (SIGTERM, by PID) at the end."""
    env = {
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        **TEST_SERVER_ENV,
        "WORKLY_DATABASE_URL": app_db,
        "WORKLY_DATABASE_SCHEMA": SCHEMA,
        "WORKLY_POLL_INTERVAL": "0.2",
    }
    drop_workly_env(monkeypatch)  # after app_db: pg_server may read WORKLY_TEST_DATABASE_URL
    port = free_port()
    with workly_process(serve_args(port), env, port, tmp_path / "workly.log") as base_url:
        yield base_url


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver() as running:  # each endpoint signs with its own secret
        yield running


@pytest.fixture
async def client(workly_url: str, receiver: Receiver) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(workly_url, timeout=10) as opened:
        yield opened


async def publish(
    conn: asyncpg.Connection,
    event_type: str,
    payload: Any,
    tenant: str | None = None,
    idempotency_key: str | None = None,
) -> str:
    event_id: str = await conn.fetchval(PUBLISH, event_type, json.dumps(payload), tenant, idempotency_key)
    return event_id


async def count(conn: asyncpg.Connection, sql: str, *args: Any) -> int:
    found: int = await conn.fetchval(sql, *args)
    return found


async def secret_of(client: httpx.AsyncClient, endpoint_id: str) -> str:
    response = await client.get(f"/v1/endpoints/{endpoint_id}/secret")
    assert response.status_code == 200, response.text
    secret: str = response.json()["signing_secret"]
    return secret


async def settled(client: httpx.AsyncClient, event_id: str, deliveries: int) -> dict[str, Any]:
    """The event once it has ``deliveries`` deliveries, each succeeded after one attempt
    (terminal: none of them can be delivered again)."""
    deadline = time.monotonic() + 15
    while True:
        response = await client.get(f"/v1/events/{event_id}")
        assert response.status_code == 200, response.text
        event: dict[str, Any] = response.json()
        if len(event["deliveries"]) == deliveries and all(
            d["status"] == "succeeded" for d in event["deliveries"]
        ):
            assert all(d["attempts"] == 1 for d in event["deliveries"]), event
            return event
        if time.monotonic() >= deadline:
            pytest.fail(f"event {event_id}: not {deliveries} succeeded deliveries after 15s: {event}")
        await asyncio.sleep(0.05)


def check_delivery(got: Received, event_id: str, secret: str, payload: Any) -> None:
    assert got.headers["webhook-id"] == event_id
    assert _verify(secret, got.body, got.headers), "not signed with the endpoint's secret"
    assert not _verify(TEST_SECRET, got.body, got.headers)
    assert json.loads(got.body) == payload
    assert {k.lower(): v for k, v in got.headers.items()}["content-type"] == "application/json"


async def test_a_committed_event_reaches_each_subscribed_enabled_endpoint_of_its_tenant_once(
    client: httpx.AsyncClient, receiver: Receiver, app_conn: asyncpg.Connection
) -> None:
    url = receiver.url
    subscribed = {
        "/exact": await create_endpoint(client, url("/exact"), event_types=["invoice.paid"]),
        "/prefix": await create_endpoint(client, url("/prefix"), event_types=["invoice.*"]),
        "/every": await create_endpoint(client, url("/every")),  # every type but workly.*
    }
    other_type = await create_endpoint(client, url("/other-type"), event_types=["user.created"])
    disabled = await create_endpoint(client, url("/disabled"), event_types=["invoice.paid"])
    response = await client.post(f"/v1/endpoints/{disabled['id']}/disable")
    assert response.status_code == 200 and response.json()["enabled"] is False, response.text
    acme = await create_endpoint(client, url("/acme"), event_types=["invoice.*"], tenant="acme")
    acme_other_type = await create_endpoint(client, url("/acme-other"), event_types=["user.*"], tenant="acme")

    async with app_conn.transaction():
        await app_conn.execute("CREATE TABLE invoices (id integer PRIMARY KEY, paid boolean NOT NULL)")
        await app_conn.execute("INSERT INTO invoices VALUES (1, true)")
        event_id = await publish(app_conn, "invoice.paid", {"n": 1})
    assert event_id.startswith("evt_")
    for path, endpoint in subscribed.items():
        [got] = await receiver.wait_for(path, 1)
        check_delivery(got, event_id, await secret_of(client, endpoint["id"]), {"n": 1})
    event = await settled(client, event_id, len(subscribed))
    assert (event["type"], event["tenant"], event["payload"]) == ("invoice.paid", None, {"n": 1})
    assert sorted(d["endpoint_id"] for d in event["deliveries"]) == sorted(
        endpoint["id"] for endpoint in subscribed.values()
    )

    async with app_conn.transaction():
        acme_event = await publish(app_conn, "invoice.paid", {"n": 2}, tenant="acme")
    [got] = await receiver.wait_for("/acme", 1)
    check_delivery(got, acme_event, await secret_of(client, acme["id"]), {"n": 2})
    event = await settled(client, acme_event, 1)
    assert [d["endpoint_id"] for d in event["deliveries"]] == [acme["id"]]

    # Every delivery stored is terminal: what the receiver holds now is all it will get.
    for path in subscribed:
        assert len(receiver.at(path)) == 1
    for left_out in (other_type, disabled, acme_other_type):
        assert receiver.at(left_out["url"].removeprefix(receiver.base_url)) == []
        tasks = (await client.get(f"/v1/endpoints/{left_out['id']}/tasks")).json()["tasks"]
        assert tasks == []
    assert len(receiver.at("/acme")) == 1


async def test_a_rolled_back_event_leaves_nothing_and_reaches_nobody(
    client: httpx.AsyncClient, receiver: Receiver, app_conn: asyncpg.Connection
) -> None:
    endpoint = await create_endpoint(client, receiver.url("/rb"), event_types=["invoice.*"])
    transaction = app_conn.transaction()
    await transaction.start()
    rolled_back = await publish(app_conn, "invoice.voided", {"n": "rolled back"})
    # Inside the transaction the function has stored the event and its one delivery.
    assert await count(app_conn, "SELECT count(*) FROM workly.events WHERE id = $1", rolled_back) == 1
    assert await count(app_conn, "SELECT count(*) FROM workly.tasks WHERE event_id = $1", rolled_back) == 1
    await transaction.rollback()
    assert await count(app_conn, "SELECT count(*) FROM workly.events") == 0
    assert await count(app_conn, "SELECT count(*) FROM workly.tasks") == 0
    assert (await client.get(f"/v1/events/{rolled_back}")).status_code == 404

    marker = await publish(app_conn, "invoice.marker", {"n": "committed later"})
    [got] = await receiver.wait_for("/rb", 1)
    check_delivery(got, marker, await secret_of(client, endpoint["id"]), {"n": "committed later"})
    await settled(client, marker, 1)
    assert [r.headers["webhook-id"] for r in receiver.at("/rb")] == [marker]
    listed = (await client.get("/v1/events")).json()["events"]
    assert [event["id"] for event in listed] == [marker]


async def test_an_idempotency_key_gives_one_event_within_across_and_between_transactions(
    client: httpx.AsyncClient, receiver: Receiver, app_db: str, app_conn: asyncpg.Connection
) -> None:
    endpoint = await create_endpoint(client, receiver.url("/idem"))
    async with app_conn.transaction():
        first = await publish(app_conn, "order.placed", {"n": 1}, idempotency_key="order-9")
        assert await publish(app_conn, "order.placed", {"n": 2}, idempotency_key="order-9") == first
    assert await publish(app_conn, "order.placed", {"n": 3}, idempotency_key="order-9") == first
    # Keys are per tenant: acme's order-9 is another event (acme has no endpoint).
    acme = await publish(app_conn, "order.placed", {"n": 4}, tenant="acme", idempotency_key="order-9")
    assert acme != first

    # Two transactions at once: the second waits for the first's COMMIT, then answers its event.
    other = await asyncpg.connect(app_db)
    try:
        async with app_conn.transaction():
            raced = await publish(app_conn, "order.placed", {"n": 5}, idempotency_key="order-10")
            in_other = other.transaction()
            await in_other.start()
            second = asyncio.create_task(publish(other, "order.placed", {"n": 6}, idempotency_key="order-10"))
            await blocked_on_a_lock(app_conn, other.get_server_pid(), second)
        assert await asyncio.wait_for(second, 10) == raced  # no UniqueViolationError (23505)
        await in_other.commit()
    finally:
        await other.close()

    secret = await secret_of(client, endpoint["id"])
    delivered = await receiver.wait_for("/idem", 2)
    await settled(client, first, 1)
    await settled(client, raced, 1)
    assert await count(app_conn, "SELECT count(*) FROM workly.events") == 3
    assert await count(app_conn, "SELECT count(*) FROM workly.tasks") == 2
    assert {r.headers["webhook-id"]: json.loads(r.body) for r in delivered} == {
        first: {"n": 1},
        raced: {"n": 5},
    }
    assert all(_verify(secret, r.body, r.headers) for r in delivered)
    assert len(receiver.at("/idem")) == 2


async def blocked_on_a_lock(observer: asyncpg.Connection, pid: int, call: asyncio.Task[str]) -> None:
    """Until backend ``pid`` waits on a lock (``call`` is what it runs); fails if it finished."""
    deadline = time.monotonic() + 15
    while not call.done():
        await observer.execute("SELECT pg_stat_clear_snapshot()")  # observer may be in a transaction
        kind = await observer.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid)
        if kind == "Lock":
            return
        if time.monotonic() >= deadline:
            pytest.fail(f"backend {pid} did not wait on a lock within 15s (seen: {kind})")
        await asyncio.sleep(0.02)
    pytest.fail(f"the second publish did not wait for the first transaction: {call!r}")


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ("type => 'workly.endpoint.disabled', payload => '{}'", "type"),
        ("type => 'invoice paid', payload => '{}'", "type"),
        ("type => 'invoice..paid', payload => '{}'", "type"),
        ("type => repeat('a', 129), payload => '{}'", "type"),
        ("type => 'invoice.paid'", "payload"),
        ("type => 'invoice.paid', payload => '1', payload_base64 => 'MQ=='", "payload"),
        ("type => 'invoice.paid', payload_base64 => 'not base64!'", "payload_base64"),
        ("type => 'invoice.paid', payload => '1', tenant => ''", "tenant"),
        ("type => 'invoice.paid', payload => '1', key => repeat('k', 256)", "key"),
        ("type => 'invoice.paid', payload => '1', idempotency_key => E'a\\nb'", "idempotency_key"),
        ("type => 'invoice.paid', payload => '1', delay => -1", "delay"),
        ("type => 'invoice.paid', payload => '1', delay => 1, run_at => now()", "delay"),
        ("type => 'invoice.paid', payload => '1', run_at => '3000-01-01Z'", "run_at"),
        ("type => 'invoice.paid', payload => '1', callback_url => 'ftp://example.com/'", "callback_url"),
        (
            "type => 'invoice.paid', payload => '1', failure_callback_url => 'http://a@b/'",
            "failure_callback_url",
        ),
    ],
)
async def test_a_refused_publish_raises_22023_naming_the_field_and_stores_nothing(
    app_conn: asyncpg.Connection, arguments: str, field: str
) -> None:
    transaction = app_conn.transaction()
    await transaction.start()
    await app_conn.execute("CREATE TABLE audit (note text)")
    with pytest.raises(asyncpg.PostgresError) as refused:
        await app_conn.fetchval(f"SELECT workly.publish_event({arguments})")
    assert refused.value.sqlstate == "22023", refused.value
    assert str(refused.value).startswith(f"{field}: "), str(refused.value)
    assert getattr(refused.value, "column_name", None) == field
    # The application's transaction is aborted: it cannot go on and commit half of its work.
    with pytest.raises(asyncpg.InFailedSQLTransactionError):
        await app_conn.execute("INSERT INTO audit VALUES ('after the refusal')")
    await transaction.rollback()
    assert await app_conn.fetchval("SELECT to_regclass('audit')") is None
    assert await count(app_conn, "SELECT count(*) FROM workly.events") == 0


async def test_a_tenant_first_named_by_sql_gets_its_record(
    client: httpx.AsyncClient, app_conn: asyncpg.Connection
) -> None:
    """docs/tenants.md: publish_event makes the tenant it names, as the API does."""
    assert (await client.get("/v1/tenants/sql-made")).status_code == 404
    await publish(app_conn, "invoice.paid", {"n": 1}, tenant="sql-made")
    await publish(app_conn, "invoice.paid", {"n": 2}, tenant="sql-made")  # made once
    response = await client.get("/v1/tenants/sql-made")
    assert response.status_code == 200, response.text
    assert response.json()["name"] == "sql-made" and response.json()["endpoints"] == 0
