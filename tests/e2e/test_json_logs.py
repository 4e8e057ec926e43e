"""WORKLY_LOG_FORMAT=json: every line the real server writes is one JSON object, the attempt
lines carry their facts as fields, and the signing secret appears nowhere."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.e2e.conftest import dev_args, drop_workly_env
from tests.support.receiver import running_receiver
from tests.support.servers import TEST_SECRET, TEST_SERVER_ENV, api_client, free_port, workly_process

pytestmark = pytest.mark.e2e


async def test_json_logs_carry_the_attempt_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drop_workly_env(monkeypatch)
    port, log = free_port(), tmp_path / "dev.log"
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, **TEST_SERVER_ENV, "WORKLY_LOG_FORMAT": "json"}
    async with running_receiver(TEST_SECRET) as receiver:
        with workly_process(dev_args(tmp_path / "w.db", port), env, port, log) as url:
            async with api_client(url) as client:
                task_id = (
                    await client.post("/v1/queues/logs/tasks", json={"url": receiver.url("/x")})
                ).json()["id"]
                await receiver.wait_for("/x", 1)
                async with asyncio.timeout(10):
                    while task_id not in log.read_text():
                        await asyncio.sleep(0.05)
    text = log.read_text()
    entries = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert entries, text
    assert all(entry.keys() >= {"time", "level", "logger", "message"} for entry in entries)
    [attempt] = [e for e in entries if e.get("event") == "attempt"]
    assert (attempt["task"], attempt["queue"], attempt["attempt"]) == (task_id, "logs", 1)
    assert (attempt["status"], attempt["outcome"]) == (204, "succeeded")
    assert attempt["duration_ms"] >= 0
    assert TEST_SECRET.removeprefix("whsec_") not in "\n".join(json.dumps(e) for e in entries)
    # Lines that are not JSON are only the startup banner `workly dev` prints itself.
    assert all(line.startswith(("{", "workly dev:")) for line in text.splitlines() if line.strip())
