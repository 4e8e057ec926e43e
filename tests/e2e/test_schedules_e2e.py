"""Schedules across processes: two real `workly serve` processes on one PostgreSQL database,
both running their scheduler. A ``* * * * *`` schedule fires at the next minute: each
firing is delivered once (not once per process), within a second of its fire time.

The processes run on a shifted wall clock (libfaketime, preloaded, reading its offset from a
file: the same in both, their monotonic clock left alone). Once both are up, the offset is set
to bring their clock a few seconds before a minute, so the test waits seconds instead of up to
a minute. Workly reads the time from its own clock only (the database is given ``now``), so
the shift reaches every time it stores."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from libfaketime import get_reload_information

from tests.e2e.conftest import drop_workly_env, serve_args
from tests.support.receiver import Receiver
from tests.support.servers import TEST_SECRET, TEST_SERVER_ENV, api_client, free_port, workly_process

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]
SCHEDULES = 4
# Within a second of the fire time: the scheduler sleeps until it, the task is due at it,
# and the dispatchers are woken when it is stored.
ON_TIME = 1.0
# Seconds of the processes' clock from the shift to the minute: the schedules' creation fits.
LEAD = 5.0


def shift_to_before_a_minute(lead: float) -> float:
    """Seconds to add to the wall clock so that it reads ``lead`` seconds before a minute."""
    now = time.time()
    return (60 - lead) - now % 60 + (60 if now % 60 > 60 - lead else 0)


@pytest.fixture
def two_processes(
    pg_fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, str, float]]:
    """Two servers whose clock reads ``LEAD`` seconds before a minute, and its shift."""
    _, preload = get_reload_information()
    offset = tmp_path / "clock"
    offset.write_text("+0\n")
    env = {
        "WORKLY_SIGNING_SECRET": TEST_SECRET, **TEST_SERVER_ENV, "WORKLY_DATABASE_URL": pg_fresh_db,
        **preload, "FAKETIME_TIMESTAMP_FILE": str(offset),
    }  # fmt: skip
    drop_workly_env(monkeypatch)
    port_a, port_b = free_port(), free_port()
    with (
        workly_process(serve_args(port_a), env, port_a, tmp_path / "a.log") as a,
        workly_process(serve_args(port_b), env, port_b, tmp_path / "b.log") as b,
    ):
        shift = shift_to_before_a_minute(LEAD)
        offset.write_text(f"+{shift:.6f}\n")  # read again at each clock reading
        yield a, b, shift


async def schedule(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await client.post(
        "/v1/schedules", json={"cron": "* * * * *", "queue": "ticks", "task": {"url": url}}
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def all_succeeded(client: httpx.AsyncClient, count: int) -> list[dict[str, Any]]:
    """The queue's tasks once ``count`` of them succeeded (the results follow the deliveries)."""
    for _ in range(500):
        response = await client.get("/v1/queues/ticks/tasks", params={"limit": 100})
        tasks: list[dict[str, Any]] = response.json()["tasks"] if response.status_code == 200 else []
        if sum(task["status"] == "succeeded" for task in tasks) >= count:
            return tasks
        await asyncio.sleep(0.02)
    raise AssertionError(f"not {count} succeeded tasks: {tasks}")


async def test_each_firing_is_delivered_once_within_a_second_with_two_processes(
    two_processes: tuple[str, str, float], receiver: Receiver
) -> None:
    a, b, shift = two_processes
    async with api_client(a) as via_a, api_client(b) as via_b:
        # Created through both processes: either scheduler may fire any of them.
        created = [
            await schedule(via_a if i % 2 else via_b, receiver.url(f"/s{i}")) for i in range(SCHEDULES)
        ]
        fire_at = datetime.fromisoformat(created[0]["next_run_at"].replace("Z", "+00:00"))
        assert all(s["next_run_at"] == created[0]["next_run_at"] for s in created)
        # Created on the shifted clock, due at its next minute: within LEAD seconds.
        assert 0 < fire_at.timestamp() - (time.time() + shift) <= LEAD, (fire_at, shift)
        arrivals = [(await receiver.wait_for(f"/s{i}", 1, timeout=LEAD + 10))[0] for i in range(SCHEDULES)]
        late = [arrival.at + shift - fire_at.timestamp() for arrival in arrivals]
        print(f"fire time → delivery: {', '.join(f'{s * 1000:.0f} ms' for s in late)}")
        assert all(0 <= seconds < ON_TIME for seconds in late), late
        tasks = await all_succeeded(via_a, SCHEDULES)
        assert len(tasks) == SCHEDULES  # one task per schedule and fire time
        assert {task["run_at"] for task in tasks} == {created[0]["next_run_at"]}
        assert [len(receiver.at(f"/s{i}")) for i in range(SCHEDULES)] == [1] * SCHEDULES
        for one in created:
            after = (await via_b.get(f"/v1/schedules/{one['id']}")).json()
            assert after["last_run_at"] == one["next_run_at"] and after["last_task_id"] in {
                t["id"] for t in tasks
            }
