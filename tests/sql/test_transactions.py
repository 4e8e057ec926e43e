"""enqueue_task in the application's own transactions, against a real `workly serve`.

The application holds an asyncpg connection with the default search_path and calls
``workly.enqueue_task(...)`` inside its transactions; a `workly serve` subprocess runs in
schema ``workly`` of the same database and delivers to a receiver on 127.0.0.1 that
verifies the Standard Webhooks signature. What a transaction leaves decides what is
delivered: a COMMIT exactly once, a ROLLBACK (of the transaction or of a savepoint)
nothing, and nothing is delivered before the COMMIT. The waits are on what can be seen
(the receiver, the API, the tables); none is a sleep.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.e2e.conftest import drop_workly_env, get_attempts, put_queue, serve_args, wait_for_status
from tests.sql.conftest import SCHEMA
from tests.support.receiver import Received, Receiver, running_receiver
from tests.support.servers import TEST_SECRET, TEST_SERVER_ENV, api_client, free_port, workly_process

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

POLL_INTERVAL = 0.2
# With the idle poll this slow, a delivery within WOKEN_WITHIN of the COMMIT was woken by the
# sql_arrivals poll (WORKLY_SQL_POLL_INTERVAL, left at its default), not found by the idle poll.
SLOW_POLL_INTERVAL = 60.0
WOKEN_WITHIN = 10.0
LOAD_CONNECTIONS = 8
LOAD_SECONDS = 5.0
LOAD_ROLLBACK_SHARE = 0.2
LOAD_DRAIN_TIMEOUT = 60.0

ENQUEUE = "SELECT workly.enqueue_task(queue => $1, url => $2, body => $3::jsonb, idempotency_key => $4)"

Start = Callable[..., Awaitable[str]]


@pytest.fixture
def start_workly(app_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    """``await start_workly(poll_interval)`` runs `workly serve` on ``app_db`` (schema
    ``workly``) and returns its base URL; a test may first do what it needs done with no
    Workly running. Stopped (SIGTERM, by PID) at the end."""
    drop_workly_env(monkeypatch)  # after app_db: pg_server may read WORKLY_TEST_DATABASE_URL
    with ExitStack() as stack:

        async def start(poll_interval: float = POLL_INTERVAL) -> str:
            env = {
                "WORKLY_SIGNING_SECRET": TEST_SECRET,
                **TEST_SERVER_ENV,
                "WORKLY_DATABASE_URL": app_db,
                "WORKLY_DATABASE_SCHEMA": SCHEMA,
                "WORKLY_POLL_INTERVAL": str(poll_interval),
            }
            port = free_port()
            process = workly_process(serve_args(port), env, port, tmp_path / "workly.log")
            base_url: str = await asyncio.to_thread(stack.enter_context, process)
            return base_url

        yield start


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver(TEST_SECRET) as running:
        yield running


async def enqueue(
    conn: asyncpg.Connection, queue: str, url: str, body: Any, idempotency_key: str | None = None
) -> str:
    task_id: str = await conn.fetchval(ENQUEUE, queue, url, json.dumps(body), idempotency_key)
    return task_id


def body_of(request: Received) -> Any:
    return json.loads(request.body)


def header(request: Received, name: str) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == name), None)


def webhook_ids(requests: list[Received]) -> list[str]:
    return [r.headers["webhook-id"] for r in requests]


async def count(conn: asyncpg.Connection, sql: str, *args: Any) -> int:
    found: int = await conn.fetchval(sql, *args)
    return found


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str | Callable[[], str], timeout: float = 15.0
) -> None:
    """Until ``check()`` holds; fails after ``timeout`` seconds, saying ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() >= deadline:
            pytest.fail(f"not within {timeout}s: {what if isinstance(what, str) else what()}")
        await asyncio.sleep(0.02)


async def arrivals_taken(conn: asyncpg.Connection) -> None:
    """Until every committed arrival row has been taken by the server's arrival poll."""

    async def empty() -> bool:
        return await count(conn, "SELECT count(*) FROM workly.sql_arrivals") == 0

    await eventually(empty, "the server took the sql_arrivals rows")


async def all_succeeded(client: httpx.AsyncClient, task_ids: list[str]) -> None:
    """Each task succeeded after exactly one attempt: terminal, so no delivery can follow."""
    for task_id in task_ids:
        task = await wait_for_status(client, task_id, "succeeded")
        assert task["attempts"] == 1, task
        assert len(await get_attempts(client, task_id)) == 1


async def test_a_committed_task_is_delivered_once_as_given_woken_by_the_commit(
    start_workly: Start, receiver: Receiver, app_conn: asyncpg.Connection
) -> None:
    base_url = await start_workly(SLOW_POLL_INTERVAL)
    body = {"id": 7, "to": "ana@example.com", "lines": [1, 2]}
    async with app_conn.transaction():
        await app_conn.execute("CREATE TABLE signups (email text PRIMARY KEY)")
        await app_conn.execute("INSERT INTO signups VALUES ('ana@example.com')")
        task_id = await app_conn.fetchval(
            "SELECT workly.enqueue_task(queue => 'emails', url => $1, method => 'PUT', "
            "headers => $2::jsonb, body => $3::jsonb)",
            receiver.url("/emails"),
            json.dumps({"x-app": "shop"}),
            json.dumps(body),
        )
    committed = time.time()
    assert task_id.startswith("task_")
    [got] = await receiver.wait_for("/emails", 1, timeout=WOKEN_WITHIN)
    print(f"COMMIT → delivery (idle poll {SLOW_POLL_INTERVAL:g}s): {(got.at - committed) * 1000:.1f} ms")
    assert got.verified is True
    assert got.method == "PUT"
    assert got.headers["webhook-id"] == task_id
    assert header(got, "x-app") == "shop"
    assert header(got, "content-type") == "application/json"
    assert body_of(got) == body
    async with api_client(base_url) as client:
        await all_succeeded(client, [task_id])
        task = (await client.get(f"/v1/tasks/{task_id}")).json()
        assert (task["queue"], task["method"], task["url"]) == ("emails", "PUT", receiver.url("/emails"))
        assert task["headers"] == {"x-app": "shop", "content-type": "application/json"}
        assert task["body"] == body
    assert len(receiver.at("/emails")) == 1


async def test_nothing_is_delivered_before_the_commit(
    start_workly: Start, receiver: Receiver, app_db: str, app_conn: asyncpg.Connection
) -> None:
    base_url = await start_workly()
    holder = await asyncpg.connect(app_db)
    try:
        held = holder.transaction()
        await held.start()
        task_id = await enqueue(holder, "held", receiver.url("/held"), {"tag": "held"})
        async with api_client(base_url) as client:
            # Each marker, committed by another connection while the transaction stays open,
            # is delivered: the server took its arrival and claimed after that commit.
            for n in range(1, 4):
                await enqueue(app_conn, "markers", receiver.url("/marker"), {"n": n})
                await receiver.wait_for("/marker", n)
                await arrivals_taken(app_conn)
                assert receiver.at("/held") == []
                assert (await client.get(f"/v1/tasks/{task_id}")).status_code == 404
                assert (await client.get("/v1/queues/held")).status_code == 404
            await held.commit()
            [got] = await receiver.wait_for("/held", 1)
            assert got.headers["webhook-id"] == task_id and got.verified
            await all_succeeded(client, [task_id])
    finally:
        await holder.close()


async def test_a_rolled_back_task_leaves_nothing_and_is_never_delivered(
    start_workly: Start, receiver: Receiver, app_conn: asyncpg.Connection
) -> None:
    # No Workly runs yet, so nothing takes the sql_arrivals rows: what each transaction
    # left there can be counted.
    url = receiver.url("/rb")
    transaction = app_conn.transaction()
    await transaction.start()
    rolled_back = await enqueue(app_conn, "never-created", url, {"tag": "rolled back"})
    # Inside the transaction the function has stored the task, its new queue and an arrival.
    assert await count(app_conn, "SELECT count(*) FROM workly.tasks WHERE id = $1", rolled_back) == 1
    assert await count(app_conn, "SELECT count(*) FROM workly.queues WHERE name = 'never-created'") == 1
    assert await count(app_conn, "SELECT count(*) FROM workly.sql_arrivals") == 1
    await transaction.rollback()
    assert await count(app_conn, "SELECT count(*) FROM workly.tasks") == 0
    assert await count(app_conn, "SELECT count(*) FROM workly.queues WHERE name = 'never-created'") == 0
    assert await count(app_conn, "SELECT count(*) FROM workly.sql_arrivals") == 0
    before = await enqueue(app_conn, "markers", url, {"tag": "before"})  # its own transaction
    assert await count(app_conn, "SELECT count(*) FROM workly.sql_arrivals") == 1  # what a commit leaves

    base_url = await start_workly()
    after = await enqueue(app_conn, "markers", url, {"tag": "after"})
    await receiver.wait_for("/rb", 2)
    async with api_client(base_url) as client:
        await all_succeeded(client, [before, after])
        assert (await client.get(f"/v1/tasks/{rolled_back}")).status_code == 404
        assert (await client.get("/v1/queues/never-created")).status_code == 404
        listed = (await client.get("/v1/tasks")).json()["tasks"]
        assert sorted(task["id"] for task in listed) == sorted([before, after])
    assert sorted(webhook_ids(receiver.at("/rb"))) == sorted([before, after])
    assert sorted(body_of(r)["tag"] for r in receiver.at("/rb")) == ["after", "before"]


async def test_a_rolled_back_savepoint_drops_its_task_and_keeps_the_others(
    start_workly: Start, receiver: Receiver, app_conn: asyncpg.Connection
) -> None:
    base_url = await start_workly()
    url = receiver.url("/sp")
    async with app_conn.transaction():
        first = await enqueue(app_conn, "sp", url, {"tag": "first"})
        savepoint = app_conn.transaction()  # nested: SAVEPOINT
        await savepoint.start()
        dropped = await enqueue(app_conn, "sp", url, {"tag": "dropped"})
        await savepoint.rollback()  # ROLLBACK TO SAVEPOINT
        async with app_conn.transaction():  # a savepoint released: its task stays
            inner = await enqueue(app_conn, "sp", url, {"tag": "inner"})
        last = await enqueue(app_conn, "sp", url, {"tag": "last"})
    kept = [first, inner, last]
    await receiver.wait_for("/sp", len(kept))
    async with api_client(base_url) as client:
        await all_succeeded(client, kept)
        assert (await client.get(f"/v1/tasks/{dropped}")).status_code == 404
    assert await count(app_conn, "SELECT count(*) FROM workly.tasks WHERE id = $1", dropped) == 0
    delivered = receiver.at("/sp")
    assert sorted(webhook_ids(delivered)) == sorted(kept)
    assert sorted(body_of(r)["tag"] for r in delivered) == ["first", "inner", "last"]
    assert all(r.verified for r in delivered)


async def blocked_on_a_lock(observer: asyncpg.Connection, pid: int, call: asyncio.Task[str]) -> None:
    """Until backend ``pid`` waits on a lock (``call`` is what it runs); fails if it finished."""

    async def waiting_or_done() -> bool:
        if call.done():
            return True
        await observer.execute("SELECT pg_stat_clear_snapshot()")  # observer may be in a transaction
        kind = await observer.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid)
        return bool(kind == "Lock")

    await eventually(waiting_or_done, f"backend {pid} waits on a lock")
    if call.done():
        pytest.fail(f"the second enqueue did not wait for the first transaction: {call!r}")


async def race_on_key(
    a: asyncpg.Connection, b: asyncpg.Connection, url: str, key: str, *, commit_first: bool
) -> tuple[str, str]:
    """A enqueues with ``key`` in a transaction it keeps open; B, in its own, enqueues with
    the same key and waits for A; A commits (or rolls back); B answers and commits. Returns
    the ids A and B were given."""
    in_a = a.transaction()
    await in_a.start()
    a_id = await enqueue(a, "billing", url, {"tag": f"{key} A"}, key)
    in_b = b.transaction()
    await in_b.start()
    b_call = asyncio.create_task(enqueue(b, "billing", url, {"tag": f"{key} B"}, key))
    await blocked_on_a_lock(a, b.get_server_pid(), b_call)
    if commit_first:
        await in_a.commit()
    else:
        await in_a.rollback()
    b_id = await asyncio.wait_for(b_call, 10)  # a UniqueViolationError (23505) would raise here
    await in_b.commit()
    return a_id, b_id


async def test_an_idempotency_key_gives_one_task_within_across_and_between_transactions(
    start_workly: Start, receiver: Receiver, app_db: str, app_conn: asyncpg.Connection
) -> None:
    base_url = await start_workly()
    url = receiver.url("/idem")
    async with app_conn.transaction():
        first = await enqueue(app_conn, "billing", url, {"tag": "order-1"}, "order-1")
        assert await enqueue(app_conn, "billing", url, {"tag": "order-1 again"}, "order-1") == first
    assert await enqueue(app_conn, "billing", url, {"tag": "order-1 later"}, "order-1") == first
    refund = await enqueue(app_conn, "refunds", url, {"tag": "order-1 refund"}, "order-1")  # per queue
    assert refund != first

    other = await asyncpg.connect(app_db)
    try:
        won, answered = await race_on_key(app_conn, other, url, "order-2", commit_first=True)
        assert answered == won
        rolled_back, stored = await race_on_key(app_conn, other, url, "order-3", commit_first=False)
        assert stored != rolled_back
    finally:
        await other.close()

    expected = {first: "order-1", refund: "order-1 refund", won: "order-2 A", stored: "order-3 B"}
    await receiver.wait_for("/idem", len(expected))
    async with api_client(base_url) as client:
        await all_succeeded(client, list(expected))
        assert (await client.get(f"/v1/tasks/{rolled_back}")).status_code == 404
    delivered = receiver.at("/idem")
    assert len(delivered) == len(expected)
    assert {r.headers["webhook-id"]: body_of(r)["tag"] for r in delivered} == expected


async def place_orders(app_db: str, url: str, n: int, until: float) -> tuple[dict[int, str], set[str]]:
    """One application connection: transactions back to back until ``until`` (monotonic),
    each an order and its task; about LOAD_ROLLBACK_SHARE of them rolled back. Returns
    {order id: task id} of the committed ones and the task ids rolled back."""
    conn = await asyncpg.connect(app_db)
    rng = random.Random(n)
    committed: dict[int, str] = {}
    rolled_back: set[str] = set()
    try:
        while time.monotonic() < until:
            transaction = conn.transaction()
            await transaction.start()
            order_id: int = await conn.fetchval("INSERT INTO orders (worker) VALUES ($1) RETURNING id", n)
            task_id = await enqueue(conn, "orders", url, {"order_id": order_id})
            if rng.random() < LOAD_ROLLBACK_SHARE:
                await transaction.rollback()
                rolled_back.add(task_id)
            else:
                await transaction.commit()
                committed[order_id] = task_id
    finally:
        await conn.close()
    return committed, rolled_back


async def test_concurrent_application_transactions_deliver_exactly_the_committed_tasks(
    start_workly: Start, receiver: Receiver, app_db: str, app_conn: asyncpg.Connection
) -> None:
    base_url = await start_workly()
    async with api_client(base_url) as client:
        await put_queue(client, "orders", max_concurrency=100)
    await app_conn.execute(
        "CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, worker integer NOT NULL)"
    )
    url = receiver.url("/orders")
    until = time.monotonic() + LOAD_SECONDS
    results = await asyncio.gather(*(place_orders(app_db, url, n, until) for n in range(LOAD_CONNECTIONS)))
    committed = {order: task for done, _ in results for order, task in done.items()}
    rolled_back = set().union(*(dropped for _, dropped in results))
    expected = len(committed)
    assert expected > 0 and rolled_back
    started = time.monotonic()

    async def drained() -> bool:
        # Delivered, and recorded: each committed task succeeded, so no delivery can follow.
        done = await count(
            app_conn, "SELECT count(*) FROM workly.tasks WHERE queue = 'orders' AND status = 'succeeded'"
        )
        return done == expected and len(receiver.at("/orders")) >= expected

    await eventually(
        drained,
        lambda: (
            f"{expected} committed tasks delivered and recorded; the receiver has "
            f"{len(receiver.at('/orders'))}"
        ),
        LOAD_DRAIN_TIMEOUT,
    )
    print(
        f"{LOAD_CONNECTIONS} connections, {LOAD_SECONDS:g}s: {expected} committed, {len(rolled_back)} rolled"
        f" back; drained {time.monotonic() - started:.1f}s after the last commit"
    )
    delivered = receiver.at("/orders")
    assert len(delivered) == expected
    assert all(r.verified for r in delivered)
    by_id = Counter(webhook_ids(delivered))
    assert [task for task, times in by_id.items() if times > 1] == []
    assert set(by_id) == set(committed.values())
    assert not set(by_id) & rolled_back
    assert {body_of(r)["order_id"]: r.headers["webhook-id"] for r in delivered} == committed
    # What the application committed and what Workly stored went together.
    orders = {row["id"] for row in await app_conn.fetch("SELECT id FROM orders")}
    assert orders == set(committed)
    assert await count(app_conn, "SELECT count(*) FROM workly.tasks") == expected
    attempts = "SELECT count(*) FROM workly.attempts a JOIN workly.tasks t ON t.seq = a.task_seq"
    assert await count(app_conn, attempts) == expected


async def test_tasks_enqueued_from_sql_are_counted_in_the_metrics_as_the_api_counts_them(
    start_workly: Start, receiver: Receiver, app_conn: asyncpg.Connection
) -> None:
    """workly_tasks_enqueued_total{queue} counts enqueue_task's tasks (before, it counted the
    API's only); publish_event's deliveries are not counted there, as the API's are not."""
    base_url = await start_workly(SLOW_POLL_INTERVAL)
    async with app_conn.transaction():
        for n in range(3):
            await enqueue(app_conn, "sql-counted", receiver.url("/counted"), {"n": n})
        await app_conn.fetchval("SELECT workly.publish_event(type => 'invoice.paid', payload => '{}'::jsonb)")
    await arrivals_taken(app_conn)
    async with api_client(base_url) as client:
        await client.post("/v1/queues/sql-counted/tasks", json={"url": receiver.url("/counted")})

        async def counted() -> bool:
            scrape = (await client.get("/metrics")).text
            return 'workly_tasks_enqueued_total{queue="sql-counted"} 4.0' in scrape

        await eventually(counted, "3 tasks from SQL and 1 from the API counted")
