"""SIGTERM with 50 slow deliveries in flight: the server exits within its grace period, and
what it had to abandon comes back after a restart: nothing is lost."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import FAST_RECOVERY_ENV, dev_args, drop_workly_env
from tests.support.receiver import running_receiver
from tests.support.servers import (
    TEST_SECRET,
    TEST_TOKEN,
    api_client,
    free_port,
    wait_ready,
    workly_subprocess,
)
from workly.cli.serving import HTTP_DRAIN_SECONDS

pytestmark = pytest.mark.e2e
GRACE = 1.0


async def test_sigterm_exits_within_the_grace_period_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    env = {
        **FAST_RECOVERY_ENV,
        "WORKLY_SHUTDOWN_GRACE": str(GRACE),
    }
    port = free_port()
    args, log = dev_args(tmp_path / "workly.db", port), tmp_path / "workly.log"
    base_url = f"http://127.0.0.1:{port}"
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.delay("/slow", 3)  # longer than the grace period, shorter than the 4 s timeout
        with workly_subprocess(args, env, port, log) as first:
            await asyncio.to_thread(wait_ready, first, port, log)
            async with api_client(base_url) as client:
                await client.put("/v1/queues/slow", json={"max_concurrency": 100, "timeout": 4})
                tasks = [{"url": receiver.url("/slow")} for _ in range(50)]
                response = await client.post("/v1/queues/slow/tasks/batch", json={"tasks": tasks})
                ids = {task["id"] for task in response.json()["tasks"]}
            async with asyncio.timeout(15):
                while receiver.in_flight < 50:
                    await asyncio.sleep(0.02)
            stopping = time.monotonic()
            first.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(first.wait, 20)
            took = time.monotonic() - stopping
        # uvicorn re-raises the signal once it has shut down cleanly: -15 is a clean exit here.
        assert code in (0, -signal.SIGTERM), log.read_text(errors="replace")
        assert "Application shutdown complete" in log.read_text(errors="replace")
        assert took < GRACE + 3, f"took {took:.1f}s to stop"  # the grace, plus closing down
        with workly_subprocess(args, env, port, log) as second:
            await asyncio.to_thread(wait_ready, second, port, log)
            async with api_client(base_url) as client:
                async with asyncio.timeout(40):
                    while (await client.get("/v1/queues/slow")).json()["counts"]["succeeded"] < 50:
                        await asyncio.sleep(0.2)
                listed = (await client.get("/v1/queues/slow/tasks", params={"limit": 100})).json()["tasks"]
    assert {task["id"] for task in listed} == ids
    assert all(task["status"] == "succeeded" for task in listed)
    assert {r.headers["webhook-id"] for r in receiver.at("/slow")} == ids


async def test_a_second_ctrl_c_stops_at_once_and_the_reaper_brings_the_rest_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    env = {**FAST_RECOVERY_ENV, "WORKLY_SHUTDOWN_GRACE": "30"}
    port = free_port()
    args, log = dev_args(tmp_path / "workly.db", port), tmp_path / "workly.log"
    base_url = f"http://127.0.0.1:{port}"
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.delay("/slow", 6)  # past the attempts' 5 s timeout, which the grace would wait for
        with workly_subprocess(args, env, port, log) as first:
            await asyncio.to_thread(wait_ready, first, port, log)
            async with api_client(base_url) as client:
                await client.put("/v1/queues/slow", json={"max_concurrency": 10, "timeout": 5})
                tasks = [{"url": receiver.url("/slow")} for _ in range(3)]
                response = await client.post("/v1/queues/slow/tasks/batch", json={"tasks": tasks})
                ids = {task["id"] for task in response.json()["tasks"]}
            async with asyncio.timeout(15):
                while receiver.in_flight < 3:
                    await asyncio.sleep(0.02)
            first.send_signal(signal.SIGINT)
            async with asyncio.timeout(10):  # the line says what the stop waits for, and how to cut it
                while "stopping: waiting up to 30s for 3 deliveries in flight" not in log.read_text():
                    await asyncio.sleep(0.05)
            stopping = time.monotonic()
            first.send_signal(signal.SIGINT)
            await asyncio.to_thread(first.wait, 20)
            took = time.monotonic() - stopping
        assert took < 4, f"took {took:.1f}s after the second Ctrl-C"  # not the attempts' 5 s, nor the grace
        receiver.delay("/slow", 0)
        # Until a reaper takes them back, each says who held it and until when: asked of a
        # process that runs no reaper (an API-only one), however long it takes to start.
        with workly_subprocess(args, {**env, "WORKLY_DISPATCH": "false"}, port, log) as reader:
            await asyncio.to_thread(wait_ready, reader, port, log)
            async with api_client(base_url) as client:
                interrupted = (await client.get(f"/v1/tasks/{next(iter(ids))}")).json()
        assert interrupted["status"] == "running", interrupted
        assert interrupted["lease"]["holder"].endswith(f":{first.pid}"), interrupted
        assert interrupted["lease"]["expires_at"] > interrupted["updated_at"]
        with workly_subprocess(args, env, port, log) as second:
            await asyncio.to_thread(wait_ready, second, port, log)
            async with api_client(base_url) as client:
                async with asyncio.timeout(40):
                    while (await client.get("/v1/queues/slow")).json()["counts"]["succeeded"] < 3:
                        await asyncio.sleep(0.2)
    assert {r.headers["webhook-id"] for r in receiver.at("/slow")} == ids


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM], ids=["after a Ctrl-C", "after a SIGTERM"])
async def test_a_sigterm_while_stopping_is_the_same_stop_and_the_grace_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: signal.Signals
) -> None:
    """Only a second Ctrl-C (SIGINT) cuts a stop short. Process managers send SIGTERM, some
    twice for one stop (systemd signals every process of a service, and a supervisor passes
    its own on): the deliveries in flight finish and are recorded (nothing is sent twice),
    and the service's stop runs (uvicorn's forced exit would skip it)."""
    drop_workly_env(monkeypatch)
    env = {**FAST_RECOVERY_ENV, "WORKLY_SHUTDOWN_GRACE": "30"}
    port = free_port()
    args, log = dev_args(tmp_path / "workly.db", port), tmp_path / "workly.log"
    base_url = f"http://127.0.0.1:{port}"
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.delay("/slow", 2)
        with workly_subprocess(args, env, port, log) as server:
            await asyncio.to_thread(wait_ready, server, port, log)
            async with api_client(base_url) as client:
                await client.put("/v1/queues/slow", json={"max_concurrency": 10, "timeout": 10})
                tasks = [{"url": receiver.url("/slow")} for _ in range(3)]
                response = await client.post("/v1/queues/slow/tasks/batch", json={"tasks": tasks})
                ids = {task["id"] for task in response.json()["tasks"]}
            async with asyncio.timeout(15):
                while receiver.in_flight < 3:
                    await asyncio.sleep(0.02)
            server.send_signal(first)
            # Once the stop is under way: two signals pending at once would be one.
            async with asyncio.timeout(10):
                while "stopping: waiting up to 30s" not in log.read_text():
                    await asyncio.sleep(0.02)
            server.send_signal(signal.SIGTERM)
            await asyncio.to_thread(server.wait, 20)
        text = log.read_text(errors="replace")
        assert "Application shutdown complete" in text, text
        assert "stopped without waiting" not in text, text
        with workly_subprocess(args, env, port, log) as second:
            await asyncio.to_thread(wait_ready, second, port, log)
            async with api_client(base_url) as client:
                listed = (await client.get("/v1/tasks", params={"queue": "slow"})).json()["tasks"]
    assert {task["id"]: task["status"] for task in listed} == dict.fromkeys(ids, "succeeded")
    assert sorted(r.headers["webhook-id"] for r in receiver.at("/slow")) == sorted(ids)  # each once


async def test_a_client_that_never_finishes_its_request_does_not_hold_the_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    port = free_port()
    args, log = dev_args(tmp_path / "workly.db", port), tmp_path / "workly.log"
    with workly_subprocess(args, FAST_RECOVERY_ENV, port, log) as server:
        await asyncio.to_thread(wait_ready, server, port, log)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        head = (b"POST /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + TEST_TOKEN.encode() + b"\r\n")  # fmt: skip
        try:
            writer.write(head + b'Content-Length: 1000\r\n\r\n{"url"')  # and the rest never comes
            await writer.drain()
            # A request answered after it: the server has read the first one's head by then.
            async with api_client(f"http://127.0.0.1:{port}") as client:
                assert (await client.get("/health/live")).status_code == 200
            stopping = time.monotonic()
            server.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(server.wait, 30)
            took = time.monotonic() - stopping
        finally:
            writer.close()
    assert code in (0, -signal.SIGTERM), log.read_text(errors="replace")
    assert took < HTTP_DRAIN_SECONDS + 5, f"took {took:.1f}s"  # the drain's limit, not the client's whim
    assert "Application shutdown complete" in log.read_text(errors="replace")
