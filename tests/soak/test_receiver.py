"""The soak's receivers over real sockets: each path answers as tools/soak/receiver.py says,
and what they see lands in the ledger (ordering, concurrency, early deliveries)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from tests.dispatch.test_dispatcher import wait_until
from tools.soak.ledger import Ledger
from tools.soak.receiver import KEY_HOLD, LIMITED_HOLD, Receiver
from workly.dispatch.http import HttpClient, HttpError
from workly.loadtest.run import ANYWHERE


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    running = Receiver("good", Ledger(), {"soak-limited": 2})
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    http = HttpClient(policy=ANYWHERE)
    yield http
    await http.close()


async def post(client: HttpClient, receiver: Receiver, path: str, webhook_id: str, body: bytes = b"") -> int:
    response = await client.request(
        "POST", f"{receiver.url}{path}", {"webhook-id": webhook_id}, body, timeout=5
    )
    return response.status


async def test_each_path_answers_as_documented(receiver: Receiver, client: HttpClient) -> None:
    assert [await post(client, receiver, "/flaky/4", "task_f") for _ in range(3)] == [500, 500, 204]
    assert await post(client, receiver, "/flaky/3", "task_g") == 500  # 3 % 3 + 1 = one failure
    assert await post(client, receiver, "/flaky/3", "task_g") == 204
    assert await post(client, receiver, "/gone/5", "task_x") == 410
    assert [await post(client, receiver, "/fail/6", "task_y") for _ in range(2)] == [500, 500]
    assert await post(client, receiver, "/nonsense/7", "task_z") == 500
    seen = receiver.ledger.deliveries
    assert len(seen[("task_f", "/flaky/4")].successes) == 1 and seen[("task_f", "/flaky/4")].requests == 3
    assert seen[("task_x", "/gone/5")].last_status == 410 and not seen[("task_x", "/gone/5")].successes


async def test_the_rough_paths_fail_the_first_request_only(receiver: Receiver, client: HttpClient) -> None:
    response = await client.request(
        "POST", f"{receiver.url}/throttle/1", {"webhook-id": "t1"}, b"", timeout=5
    )
    assert response.status == 429 and response.headers["retry-after"] == "1"
    assert await post(client, receiver, "/throttle/1", "t1") == 204
    with pytest.raises(HttpError):
        await post(client, receiver, "/reset/2", "t2")  # reset: no answer
    assert await post(client, receiver, "/reset/2", "t2") == 204
    with pytest.raises(TimeoutError):  # the stall holds the request past the client's deadline
        await client.request("POST", f"{receiver.url}/stall/3", {"webhook-id": "t3"}, b"", timeout=0.3)
    assert await post(client, receiver, "/stall/3", "t3") == 204


async def test_endpoint_deliveries_are_known_by_the_event_id_and_path(
    receiver: Receiver, client: HttpClient
) -> None:
    body = json.dumps({"serial": 14}).encode()  # 14 % 7 == 0: ep/flaky fails it once
    assert await post(client, receiver, "/ep/flaky", "evt_1", body) == 500
    assert await post(client, receiver, "/ep/flaky", "evt_1", body) == 204
    assert await post(client, receiver, "/ep/orders", "evt_1", body) == 204
    assert await post(client, receiver, "/ep/all", "evt_2", b'{"type": "workly.task.failed"}') == 204
    seen = receiver.ledger.deliveries
    assert len(seen[("evt_1", "/ep/flaky")].successes) == 1 and seen[("evt_1", "/ep/flaky")].requests == 2
    assert len(seen[("evt_1", "/ep/orders")].successes) == 1
    assert receiver.other == 1  # Workly's own notices are answered, not booked


async def test_keys_out_of_order_and_early_deliveries_are_breaches(
    receiver: Receiver, client: HttpClient
) -> None:
    assert await post(client, receiver, "/key/k1/1/21", "task_a") == 204
    assert await post(client, receiver, "/key/k1/0/22", "task_b") == 204  # seq 0 after seq 1
    due = int((time.time() + 60) * 1000)
    assert await post(client, receiver, f"/delay/23/{due}", "task_c") == 204
    assert [b.kind for b in receiver.ledger.breaches] == ["order", "early"]


async def test_two_requests_of_a_key_held_at_once_are_an_overlap(receiver: Receiver) -> None:
    clients = [HttpClient(policy=ANYWHERE) for _ in range(2)]
    try:
        started = time.monotonic()
        statuses = await asyncio.gather(
            post(clients[0], receiver, "/key/k1/0/1", "task_a"),
            post(clients[1], receiver, "/key/k1/1/2", "task_b"),
        )
        assert statuses == [204, 204]
        assert time.monotonic() - started >= KEY_HOLD  # held before answering
        assert await post(clients[0], receiver, "/key/k1/2/3", "task_c") == 204  # after both: fine
    finally:
        for c in clients:
            await c.close()
    [breach] = receiver.ledger.breaches
    assert breach.kind == "overlap" and breach.detail.startswith(
        "key k1: seq 1 (task_b) arrived while seq 0 (task_a)"
    )
    assert (receiver.ledger.keyed_requests, receiver.ledger.max_key_in_flight) == (3, 2)


async def test_a_keyed_request_whose_connection_ends_is_no_longer_in_flight(
    receiver: Receiver, client: HttpClient
) -> None:
    with pytest.raises(TimeoutError):  # the client gives up and closes before the answer
        await client.request(
            "POST", f"{receiver.url}/key/k1/0/1", {"webhook-id": "task_a"}, b"", timeout=0.05
        )
    await wait_until(lambda: receiver.ledger.in_flight_of("k1") == 0)  # its connection_lost came
    assert await post(client, receiver, "/key/k1/1/2", "task_b") == 204
    assert receiver.ledger.breaches == []
    # The held answer found its connection gone: no 2xx is booked for the request given up on.
    assert not receiver.ledger.deliveries[("task_a", "/key/k1/0/1")].successes


async def test_a_limited_queue_over_its_limit_is_a_breach(receiver: Receiver) -> None:
    clients = [HttpClient(policy=ANYWHERE) for _ in range(3)]
    try:
        started = time.monotonic()
        statuses = await asyncio.gather(
            *(post(c, receiver, f"/limited/{n}", f"task_l{n}") for n, c in enumerate(clients))
        )
        assert statuses == [204, 204, 204]
        assert time.monotonic() - started >= LIMITED_HOLD  # held before answering
    finally:
        for c in clients:
            await c.close()
    assert receiver.ledger.max_in_flight == {"soak-limited": 3}
    assert [b.kind for b in receiver.ledger.breaches] == ["concurrency"]


async def test_a_stopped_origin_refuses_connections_and_comes_back_on_its_port(
    receiver: Receiver, client: HttpClient
) -> None:
    assert await post(client, receiver, "/ok/1", "task_1") == 204
    port = receiver.port
    await receiver.stop()
    with pytest.raises(HttpError):
        await post(client, receiver, "/ok/2", "task_2")
    await receiver.start()
    assert receiver.port == port
    assert await post(client, receiver, "/ok/2", "task_2") == 204
