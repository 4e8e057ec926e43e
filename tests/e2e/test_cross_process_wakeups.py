"""Changes made through one `workly serve` process wake the dispatcher of another at once.

Two real processes share one PostgreSQL database: A serves the API only
(WORKLY_DISPATCH=false), B dispatches. Both poll only every 60 s, so a task that B delivers
within seconds of a change made through A was woken by that change (the service's
work_available: a coalesced NOTIFY that B LISTENs for), not found by B's poll.
Each test measures the time from A's answer to the delivery, and prints it (pytest -s).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import drop_workly_env, enqueue, put_queue, serve_args, wait_for_status
from tests.support.receiver import Receiver
from tests.support.servers import TEST_SECRET, TEST_SERVER_ENV, api_client, free_port, workly_process

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]
POLL_INTERVAL = 60.0
WOKEN_WITHIN = 10.0  # far below the poll interval: only a wake-up can explain a delivery this soon


@pytest.fixture
def api_and_dispatcher(
    pg_fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, str]]:
    """Base URLs of A (API only) and B (dispatcher), started in that order."""
    env = {
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        **TEST_SERVER_ENV,
        "WORKLY_DATABASE_URL": pg_fresh_db,
        "WORKLY_POLL_INTERVAL": str(POLL_INTERVAL),
    }
    drop_workly_env(monkeypatch)
    port_a, port_b = free_port(), free_port()
    with (
        workly_process(
            serve_args(port_a), {**env, "WORKLY_DISPATCH": "false"}, port_a, tmp_path / "a.log"
        ) as a,
        workly_process(serve_args(port_b), env, port_b, tmp_path / "b.log") as b,
    ):
        yield a, b


async def delivered_after(receiver: Receiver, path: str, count: int, since: float) -> float:
    """Seconds from ``since`` (time.time()) to the ``count``-th delivery at ``path``."""
    arrived = await receiver.wait_for(path, count, timeout=WOKEN_WITHIN)
    return arrived[count - 1].at - since


async def answered(call: httpx.Response) -> float:
    assert call.is_success, call.text
    return time.time()


async def test_a_resume_through_one_process_wakes_another(
    api_and_dispatcher: tuple[str, str], receiver: Receiver
) -> None:
    a, _ = api_and_dispatcher
    async with api_client(a) as client:
        await put_queue(client, "held", paused=True)
        await enqueue(client, "held", {"url": receiver.url("/resumed")})
        sent = await answered(await client.post("/v1/queues/held/resume"))
        latency = await delivered_after(receiver, "/resumed", 1, sent)
    print(f"resume → delivery by the other process: {latency * 1000:.1f} ms")


async def test_a_retry_through_one_process_wakes_another(
    api_and_dispatcher: tuple[str, str], receiver: Receiver
) -> None:
    a, _ = api_and_dispatcher
    receiver.script("/flaky", [500])  # the first attempt fails, the retried one succeeds
    async with api_client(a) as client:
        task = await enqueue(client, "once", {"url": receiver.url("/flaky"), "max_attempts": 1})
        await wait_for_status(client, task["id"], "failed", timeout=WOKEN_WITHIN)  # the enqueue woke B
        sent = await answered(await client.post(f"/v1/tasks/{task['id']}/retry"))
        latency = await delivered_after(receiver, "/flaky", 2, sent)
        await wait_for_status(client, task["id"], "succeeded", timeout=WOKEN_WITHIN)
    print(f"retry → delivery by the other process: {latency * 1000:.1f} ms")


async def test_a_queue_change_through_one_process_wakes_another(
    api_and_dispatcher: tuple[str, str], receiver: Receiver
) -> None:
    a, _ = api_and_dispatcher
    # The first delivery holds the queue's only slot for 2 s. Without a wake-up, B would
    # deliver the second task only once that slot came free (its own delivery wakes it).
    receiver.delay("/slow", 2)
    async with api_client(a) as client:
        await put_queue(client, "narrow", max_concurrency=1)
        await enqueue(client, "narrow", {"url": receiver.url("/slow")})
        await receiver.wait_for("/slow", 1, timeout=WOKEN_WITHIN)
        await enqueue(client, "narrow", {"url": receiver.url("/next")})  # no room: waits
        sent = await answered(await client.patch("/v1/queues/narrow", json={"max_concurrency": 2}))
        latency = await delivered_after(receiver, "/next", 1, sent)
        assert receiver.peak_in_flight == 2  # /next arrived while /slow still held its slot
        replaced = await put_queue(client, "narrow", max_concurrency=2, paused=True)
        assert replaced["paused"]
        await enqueue(client, "narrow", {"url": receiver.url("/after-put")})
        sent = await answered(await client.put("/v1/queues/narrow", json={"max_concurrency": 3}))
        put_latency = await delivered_after(receiver, "/after-put", 1, sent)
    print(f"PATCH → delivery by the other process: {latency * 1000:.1f} ms; PUT: {put_latency * 1000:.1f} ms")
