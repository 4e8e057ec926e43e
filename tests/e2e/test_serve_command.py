"""The delivery contract through the real CLI, against `workly serve` (PostgreSQL) and `workly dev` (SQLite).

Every test here takes ``e2e``, whose server is parametrised over both commands; the
serve-only tests at the end start ``workly serve`` themselves.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import (
    E2E,
    POLL_INTERVAL,
    drop_workly_env,
    enqueue,
    get_attempts,
    get_task,
    put_queue,
    serve_args,
    wait_for_status,
)
from tests.support.metrics import sample
from tests.support.receiver import Received, running_receiver
from tests.support.servers import TEST_SECRET, TEST_SERVER_ENV, api_client, free_port, workly_process

pytestmark = pytest.mark.e2e

FAST_RETRIES = {"min_backoff": 0.05, "max_backoff": 0.2}


async def claims_later(client: httpx.AsyncClient, claims: int = 3) -> None:
    """Wait until the server's dispatcher has claimed ``claims`` times more, past the longest
    backoff (each idle claim comes a poll interval after the last), and delivers nothing."""

    async def metric(name: str) -> float:
        return sample((await client.get("/metrics")).text, name)

    assert claims * float(POLL_INTERVAL) > FAST_RETRIES["max_backoff"]
    wanted = await metric("workly_claim_duration_seconds_count") + claims + 1
    async with asyncio.timeout(10):
        while await metric("workly_claim_duration_seconds_count") < wanted:
            await asyncio.sleep(0.02)
        while await metric("workly_deliveries_in_flight"):
            await asyncio.sleep(0.02)


def lower_headers(received: Received) -> dict[str, str]:
    return {name.lower(): value for name, value in received.headers.items()}


def epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339).timestamp()


async def test_exact_body_bytes_method_and_headers_arrive_signed(e2e: E2E) -> None:
    json_body = {"event": "order.paid", "amount": 12.5, "tags": ["ü", "€"], "nested": {"z": 1, "a": None}}
    text_body = "héllo\nworld: not JSON {"
    raw_body = b"\x00\xff\xfe" + bytes(range(256)) + b"\r\n\x80"
    sent = {
        "/json": await enqueue(
            e2e.client,
            "bytes",
            {"url": e2e.receiver.url("/json"), "headers": {"X-Custom": "one"}, "body": json_body},
        ),
        "/text": await enqueue(
            e2e.client,
            "bytes",
            {
                "url": e2e.receiver.url("/text"),
                "method": "PATCH",
                "headers": {"Content-Type": "text/plain; charset=utf-8", "X-Trace": "t-1"},
                "body": text_body,
            },
        ),
        "/raw": await enqueue(
            e2e.client,
            "bytes",
            {
                "url": e2e.receiver.url("/raw"),
                "method": "PUT",
                "headers": {"content-type": "application/octet-stream", "X-Custom": "two"},
                "body_base64": base64.b64encode(raw_body).decode(),
            },
        ),
    }
    for task in sent.values():
        await wait_for_status(e2e.client, task["id"], "succeeded")

    [as_json] = e2e.receiver.at("/json")
    assert as_json.method == "POST"
    assert as_json.body == json.dumps(json_body, separators=(",", ":"), ensure_ascii=False).encode()
    assert json.loads(as_json.body) == json_body
    assert lower_headers(as_json)["content-type"] == "application/json"
    assert lower_headers(as_json)["x-custom"] == "one"

    [as_text] = e2e.receiver.at("/text")
    assert as_text.method == "PATCH"
    assert as_text.body == text_body.encode()
    assert lower_headers(as_text)["content-type"] == "text/plain; charset=utf-8"
    assert lower_headers(as_text)["x-trace"] == "t-1"

    [as_raw] = e2e.receiver.at("/raw")
    assert as_raw.method == "PUT"
    assert as_raw.body == raw_body
    assert lower_headers(as_raw)["content-type"] == "application/octet-stream"
    assert lower_headers(as_raw)["x-custom"] == "two"

    for path, task in sent.items():
        [received] = e2e.receiver.at(path)
        assert received.verified is True, f"{path}: signature did not verify"
        assert lower_headers(received)["webhook-id"] == task["id"]
        assert lower_headers(received)["webhook-signature"].startswith("v1,")


async def test_retries_until_success_with_the_same_webhook_id(e2e: E2E) -> None:
    await put_queue(e2e.client, "retrying", **FAST_RETRIES)
    e2e.receiver.script("/flaky", [500, 500, 204])
    task = await enqueue(e2e.client, "retrying", {"url": e2e.receiver.url("/flaky"), "body": {"n": 1}})

    done = await wait_for_status(e2e.client, task["id"], "succeeded")
    assert done["attempts"] == 3
    assert done["last_status_code"] == 204
    attempts = await get_attempts(e2e.client, task["id"])
    assert [a["status_code"] for a in attempts] == [500, 500, 204]
    assert [a["attempt"] for a in attempts] == [1, 2, 3]

    deliveries = e2e.receiver.at("/flaky")
    assert len(deliveries) == 3
    assert {lower_headers(d)["webhook-id"] for d in deliveries} == {task["id"]}
    assert all(d.verified is True for d in deliveries)
    assert all(d.body == b'{"n":1}' for d in deliveries)


async def test_delayed_task_is_not_delivered_early(e2e: E2E) -> None:
    before_enqueue = time.time()
    task = await enqueue(e2e.client, "later", {"url": e2e.receiver.url("/later"), "delay": 2})
    assert task["status"] == "ready"
    assert epoch(task["run_at"]) >= before_enqueue + 2

    [delivery] = await e2e.receiver.wait_for("/later", 1, timeout=10)
    assert delivery.at >= before_enqueue + 2, f"delivered {before_enqueue + 2 - delivery.at:.3f}s early"
    assert delivery.at >= epoch(task["run_at"])
    assert delivery.verified is True
    done = await wait_for_status(e2e.client, task["id"], "succeeded")
    assert done["attempts"] == 1


async def test_410_gone_fails_at_once_and_is_not_retried(e2e: E2E) -> None:
    await put_queue(e2e.client, "gone", **FAST_RETRIES)
    e2e.receiver.script("/gone", [410])  # a wrong retry would get 204 and succeed
    task = await enqueue(e2e.client, "gone", {"url": e2e.receiver.url("/gone")})

    failed = await wait_for_status(e2e.client, task["id"], "failed")
    assert failed["attempts"] == 1
    assert failed["last_status_code"] == 410
    await claims_later(e2e.client)  # a wrong retry would have been claimed and sent by now
    assert len(e2e.receiver.at("/gone")) == 1
    after = await get_task(e2e.client, task["id"])
    assert (after["status"], after["attempts"]) == ("failed", 1)
    assert [a["status_code"] for a in await get_attempts(e2e.client, task["id"])] == [410]


async def test_failed_once_max_attempts_are_exhausted(e2e: E2E) -> None:
    await put_queue(e2e.client, "exhaust", **FAST_RETRIES)
    e2e.receiver.script("/down", [500] * 10)
    task = await enqueue(e2e.client, "exhaust", {"url": e2e.receiver.url("/down"), "max_attempts": 2})
    assert task["max_attempts"] == 2

    failed = await wait_for_status(e2e.client, task["id"], "failed")
    assert failed["attempts"] == 2
    assert failed["last_status_code"] == 500
    assert [a["status_code"] for a in await get_attempts(e2e.client, task["id"])] == [500, 500]
    await claims_later(e2e.client)
    assert len(e2e.receiver.at("/down")) == 2


# --- serve only ------------------------------------------------------------------------


async def test_serve_on_sqlite_url_with_one_worker_delivers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`workly serve` also takes a sqlite:/// URL (one process)."""
    drop_workly_env(monkeypatch)
    db = tmp_path / "serve.db"
    env = {
        "WORKLY_DATABASE_URL": f"sqlite:///{db}",
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        **TEST_SERVER_ENV,
        "WORKLY_POLL_INTERVAL": POLL_INTERVAL,
    }
    port = free_port()
    with workly_process([*serve_args(port), "--workers", "1"], env, port, tmp_path / "serve.log") as url:
        async with (
            running_receiver(TEST_SECRET) as receiver,
            api_client(url) as client,
        ):
            ready = (await client.get("/health/ready")).json()
            assert ready["checks"] == {"database": "ok", "dispatcher": "ok"}
            task = await enqueue(client, "q", {"url": receiver.url("/s"), "body": "x"})
            await wait_for_status(client, task["id"], "succeeded")
            [delivery] = receiver.at("/s")
            assert delivery.verified is True
            assert delivery.body == b'"x"'
    assert db.exists()
    banner = [
        line for line in (tmp_path / "serve.log").read_text().splitlines() if line.startswith("workly serve:")
    ]
    assert banner == [
        f"workly serve: database sqlite:///{db}",
        "workly serve: 1 worker process, with the API and a dispatcher",
        "workly serve: API tokens required (1 from WORKLY_API_TOKENS)",
        "workly serve: signing with 1 key(s) from WORKLY_SIGNING_SECRET",
        "workly serve: deliveries may reach public addresses and 127.0.0.0/8 ::1/128",
        f"workly serve: listening on http://127.0.0.1:{port}  (API docs at /docs, dashboard at /ui)",
    ]
    assert TEST_SECRET not in (tmp_path / "serve.log").read_text()
