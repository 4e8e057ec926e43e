"""Fixtures for the API tests: the real app and service on SQLite and on PostgreSQL, called
in-process through httpx's ASGI transport (test_guards.py and test_browser_guards.py go
over a real socket, where how bytes arrive matters).

The dispatcher never runs here (``dispatch=False``), and every URL a test enqueues is a
loopback one anyway, so nothing can leave this machine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings

HOOK = "http://127.0.0.1:9/hook"
PROBLEM_FIELDS = {"type", "title", "status", "detail"}


@dataclass
class Api:
    """An httpx client bound to one running app, plus the calls most tests repeat."""

    http: httpx.AsyncClient

    async def enqueue(self, queue: str = "q", expect: int = 201, **fields: Any) -> dict[str, Any]:
        response = await self.http.post(f"/v1/queues/{queue}/tasks", json={"url": HOOK, **fields})
        assert response.status_code == expect, response.text
        task: dict[str, Any] = response.json()
        return task

    async def task(self, task_id: str) -> dict[str, Any]:
        response = await self.http.get(f"/v1/tasks/{task_id}")
        assert response.status_code == 200, response.text
        task: dict[str, Any] = response.json()
        return task

    async def queue(self, name: str = "q") -> dict[str, Any]:
        response = await self.http.get(f"/v1/queues/{name}")
        assert response.status_code == 200, response.text
        queue: dict[str, Any] = response.json()
        return queue

    async def counts(self, name: str = "q") -> dict[str, int]:
        counts: dict[str, int] = (await self.queue(name))["counts"]
        return counts

    async def queue_names(self) -> list[str]:
        response = await self.http.get("/v1/queues")
        assert response.status_code == 200, response.text
        return [queue["name"] for queue in response.json()["queues"]]


def assert_problem(response: httpx.Response, status: int, slug: str | None = None) -> dict[str, Any]:
    """An RFC 9457 problem with this status (and type slug); returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body.keys() >= PROBLEM_FIELDS, body
    assert body["status"] == status
    assert body["type"].startswith("urn:workly:problem:")
    if slug is not None:
        assert body["type"] == f"urn:workly:problem:{slug}"
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return body


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[Api]:
    settings = Settings(database_url=database_url, signing_secret=TEST_SECRET, dispatch=False)
    async with in_process(settings) as (_, http):
        yield Api(http)
