"""Every answer, over a real socket, carries ``x-content-type-options: nosniff`` and
``cache-control: no-store`` unless it says how it may be cached: the API's answers, the fast
enqueue path's, the guards' refusals, the problems, health and metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.api.conftest import HOOK
from tests.support.servers import TEST_SECRET, running_app
from workly.config import Settings

TOKEN = "answer-headers-token-aaaaaaaaaaaaaaaa"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def http(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=TOKEN,
        max_request_bytes=4096,
    )  # fmt: skip
    async with running_app(settings) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        yield client


def assert_not_kept(response: httpx.Response) -> None:
    assert response.headers["x-content-type-options"] == "nosniff", response.headers
    assert response.headers["cache-control"] == "no-store", response.headers
    assert len(response.headers.get_list("cache-control")) == 1


async def test_every_kind_of_answer_carries_them(http: httpx.AsyncClient) -> None:
    answers = {
        "fast enqueue 201": await http.post("/v1/queues/q/tasks", headers=AUTH, json={"url": HOOK}),
        "read 200": await http.get("/v1/queues", headers=AUTH),
        "not found 404": await http.get("/v1/tasks/task_01ARZ3NDEKTSV4RRFFQ69G5FAV", headers=AUTH),
        "invalid 422": await http.post("/v1/queues/q/tasks", headers=AUTH, json={"url": "ftp://x"}),
        "no token 401": await http.get("/v1/queues"),
        "too large 413": await http.post("/v1/queues/q/tasks", headers=AUTH, content=b"x" * 5000),
        "health 200": await http.get("/health/live"),
        "metrics 200": await http.get("/metrics", headers=AUTH),
        "openapi 200": await http.get("/openapi.json", headers=AUTH),
    }
    for name, response in answers.items():
        assert response.status_code == int(name.rsplit(" ", 1)[1]), (name, response.text)
        assert_not_kept(response)


async def test_an_answer_that_says_how_to_cache_it_keeps_that(http: httpx.AsyncClient) -> None:
    stylesheet = await http.get("/ui/assets/workly.css")
    assert stylesheet.status_code == 200
    assert stylesheet.headers.get_list("cache-control") == ["max-age=300"]
    assert stylesheet.headers["x-content-type-options"] == "nosniff"
