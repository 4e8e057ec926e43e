"""WORKLY_LOG_FORMAT=json: every line the real server writes is one JSON object, the attempt
lines carry their facts as fields, and the signing secret appears nowhere. At the default
level only attempts that did not succeed are logged; successes are at debug."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import dev_args, drop_workly_env
from tests.support.receiver import running_receiver
from tests.support.servers import TEST_SECRET, TEST_SERVER_ENV, api_client, free_port, workly_process

pytestmark = pytest.mark.e2e


async def _attempt_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: str
) -> tuple[dict[str, str], list[dict[str, Any]], str]:
    """Run `workly dev` at ``level``, deliver one task that succeeds and one that fails for
    good (500, one attempt), and read its JSON log: the two task ids, the attempt entries,
    the whole text."""
    drop_workly_env(monkeypatch)
    port, log = free_port(), tmp_path / "dev.log"
    env = {
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        **TEST_SERVER_ENV,
        "WORKLY_LOG_FORMAT": "json",
        "WORKLY_LOG_LEVEL": level,
    }
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.script("/fails", [500])
        with workly_process(dev_args(tmp_path / "w.db", port), env, port, log) as url:
            async with api_client(url) as client:
                ids = {}
                for path, extra in (("/ok", {}), ("/fails", {"max_attempts": 1})):
                    answer = await client.post(
                        "/v1/queues/logs/tasks", json={"url": receiver.url(path), **extra}
                    )
                    ids[path] = answer.json()["id"]
                # Each attempt is logged before its result is recorded: once both tasks
                # show their final status, every line there is to be is written.
                async with asyncio.timeout(10):
                    for path, final in (("/ok", "succeeded"), ("/fails", "failed")):
                        while (await client.get(f"/v1/tasks/{ids[path]}")).json()["status"] != final:
                            await asyncio.sleep(0.05)
                    while ids["/fails"] not in log.read_text():
                        await asyncio.sleep(0.05)
    text = log.read_text()
    entries = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert entries, text
    assert all(entry.keys() >= {"time", "level", "logger", "message"} for entry in entries)
    assert TEST_SECRET.removeprefix("whsec_") not in "\n".join(json.dumps(e) for e in entries)
    # Lines that are not JSON are only the startup banner `workly dev` prints itself.
    assert all(line.startswith(("{", "workly dev:")) for line in text.splitlines() if line.strip())
    return ids, [e for e in entries if e.get("event") == "attempt"], text


async def test_json_logs_carry_the_attempt_fields_of_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, attempts, text = await _attempt_entries(tmp_path, monkeypatch, "info")
    [attempt] = attempts  # the success is not logged at info
    assert (attempt["task"], attempt["queue"], attempt["attempt"]) == (ids["/fails"], "logs", 1)
    assert (attempt["level"], attempt["status"], attempt["outcome"]) == ("info", 500, "failed")
    assert attempt["duration_ms"] >= 0
    assert ids["/ok"] not in text


async def test_successes_are_logged_at_debug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ids, attempts, _ = await _attempt_entries(tmp_path, monkeypatch, "debug")
    by_task = {entry["task"]: entry for entry in attempts}
    assert by_task.keys() == set(ids.values())
    success = by_task[ids["/ok"]]
    assert (success["level"], success["status"], success["outcome"]) == ("debug", 204, "succeeded")
    assert by_task[ids["/fails"]]["level"] == "info"
