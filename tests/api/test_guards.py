"""The API's outer guards over a real socket: bearer tokens, the request size limit, and the
task body limit. Every refusal is a problem+json and stores nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api.conftest import HOOK, assert_problem
from tests.support.servers import TEST_SECRET, running_app
from workly.app import create_app
from workly.config import Settings
from workly.errors import ConfigError
from workly.service import Service

TOKENS = "first-token-aaaaaaaaaaaaaaaa second-token-bbbbbbbbbbbbbbbb"


@pytest.fixture
async def guarded(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        database_url=database_url,
        signing_secret=TEST_SECRET,
        dispatch=False,
        api_tokens=TOKENS,
        max_request_bytes=4096,
        max_body_bytes=1000,
    )
    async with running_app(settings) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        yield http


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def stored_count(http: httpx.AsyncClient) -> int:
    response = await http.get("/v1/queues", headers=bearer("first-token-aaaaaaaaaaaaaaaa"))
    return sum(sum(q["counts"].values()) for q in response.json()["queues"])


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="none"),
        pytest.param(bearer("wrong-token"), id="wrong"),
        pytest.param(bearer("first-token-aaaaaaaaaaaaaaa"), id="one-character-short"),
        pytest.param({"authorization": "Basic Zmlyc3QtdG9rZW4="}, id="basic"),
        pytest.param({"authorization": "Bearer"}, id="empty"),
    ],
)
async def test_without_a_valid_token_every_route_is_401(
    guarded: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    for method, path in [("POST", "/v1/queues/q/tasks"), ("GET", "/v1/queues"), ("GET", "/openapi.json")]:
        response = await guarded.request(method, path, headers=headers, json={"url": HOOK})
        body = assert_problem(response, 401, "unauthorized")
        assert response.headers["www-authenticate"] == 'Bearer realm="workly"'
        assert "token" in body["detail"]
    assert await stored_count(guarded) == 0


@pytest.mark.parametrize("token", ["first-token-aaaaaaaaaaaaaaaa", "second-token-bbbbbbbbbbbbbbbb"])
async def test_each_configured_token_is_accepted(guarded: httpx.AsyncClient, token: str) -> None:
    response = await guarded.post("/v1/queues/q/tasks", headers=bearer(token), json={"url": HOOK})
    assert response.status_code == 201, response.text
    lowercase = {"authorization": f"bearer {token}"}
    assert (await guarded.get("/v1/queues", headers=lowercase)).status_code == 200


async def test_health_is_public_by_default(guarded: httpx.AsyncClient) -> None:
    assert (await guarded.get("/health/live")).status_code == 200
    assert (await guarded.get("/health/ready")).status_code == 200


async def test_health_can_require_the_token(database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        signing_secret=TEST_SECRET,
        dispatch=False,
        api_tokens=TOKENS,
        public_health=False,
    )
    async with running_app(settings) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        assert_problem(await http.get("/health/ready"), 401, "unauthorized")
        assert (
            await http.get("/health/ready", headers=bearer("second-token-bbbbbbbbbbbbbbbb"))
        ).status_code == 200


async def test_a_declared_oversized_body_is_413_before_it_is_read(guarded: httpx.AsyncClient) -> None:
    headers = {**bearer("first-token-aaaaaaaaaaaaaaaa"), "content-type": "application/json"}
    body = json.dumps({"url": HOOK, "body": "x" * 5000}).encode()
    response = await guarded.post("/v1/queues/q/tasks", headers=headers, content=body)
    problem = assert_problem(response, 413, "too-large")
    assert problem["limit"] == 4096
    assert await stored_count(guarded) == 0


async def test_a_streamed_body_without_length_is_cut_off_at_the_limit(guarded: httpx.AsyncClient) -> None:
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(1000):  # up to 1 MB, if nobody stopped reading
            sent += 1024
            yield b" " * 1024

    headers = {**bearer("first-token-aaaaaaaaaaaaaaaa"), "content-type": "application/json"}
    try:
        response = await guarded.post("/v1/queues/q/tasks/batch", headers=headers, content=chunks())
    except httpx.HTTPError:
        pass  # the server may close the connection while the client still sends: also a refusal
    else:
        assert_problem(response, 413, "too-large")
    assert sent < 1000 * 1024  # the server stopped reading long before the end
    assert await stored_count(guarded) == 0


async def test_a_body_just_under_the_limit_is_accepted(guarded: httpx.AsyncClient) -> None:
    payload: dict[str, Any] = {"url": HOOK, "body": ""}
    payload["body"] = "x" * (900 - len(json.dumps(payload)))
    response = await guarded.post(
        "/v1/queues/q/tasks", headers=bearer("first-token-aaaaaaaaaaaaaaaa"), json=payload
    )
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("route", ["single", "batch"])
async def test_a_task_body_over_max_body_bytes_is_413_and_stores_nothing(
    guarded: httpx.AsyncClient, route: str
) -> None:
    auth = bearer("first-token-aaaaaaaaaaaaaaaa")
    big = {"url": HOOK, "body_base64": "A" * 1400}  # 1,050 bytes once decoded: over the 1,000 allowed
    if route == "single":
        response = await guarded.post("/v1/queues/q/tasks", headers=auth, json=big)
        assert "the task's body is 1,050 bytes" in assert_problem(response, 413, "too-large")["detail"]
    else:
        response = await guarded.post(
            "/v1/queues/q/tasks/batch", headers=auth, json={"tasks": [{"url": HOOK}, big]}
        )
        assert "task 1's body" in assert_problem(response, 413, "too-large")["detail"]
    assert await stored_count(guarded) == 0


def test_the_app_refuses_to_be_built_without_tokens_unless_anonymous(sqlite_url: str) -> None:
    """The uvicorn factory (app_from_env) cannot serve an open API by accident."""
    with pytest.raises(ConfigError, match="WORKLY_API_TOKENS"):
        create_app(Service(Settings(database_url=sqlite_url, signing_secret=TEST_SECRET)))
    assert create_app(Service(Settings(database_url=sqlite_url, signing_secret=TEST_SECRET)), anonymous=True)


async def test_the_root_leads_to_the_dashboard_which_still_asks_who_you_are(
    guarded: httpx.AsyncClient,
) -> None:
    root = await guarded.get("/")
    assert (root.status_code, root.headers["location"]) == (303, "/ui")
    page = await guarded.get("/ui")
    assert page.status_code == 303 and page.headers["location"].startswith("/ui/login")
    assert (await guarded.post("/")).status_code == 401  # only a GET is open


async def test_a_route_open_without_a_token_reads_at_most_8_kib(database_url: str) -> None:
    """/health, /metrics, the login page, log out and the stylesheet are open to anyone: none
    reads more than a login form's worth, declared or streamed (each read up to 1 MiB)."""
    token = TOKENS.split()[0]
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=token,
        public_metrics=True,
    )  # fmt: skip
    async with running_app(settings) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for path in ("/health/live", "/metrics", "/ui/logout", "/ui/assets/workly.css"):
            declared = await http.post(path, content=b"x" * 8193)
            problem = assert_problem(declared, 413, "too-large")
            assert problem["limit"] == 8192 and "without a token" in problem["detail"], path
            sent = 0

            async def chunks() -> AsyncIterator[bytes]:
                nonlocal sent
                for _ in range(1000):  # 1,000 KiB if nobody stopped reading: under the 1 MiB limit
                    sent += 1024
                    yield b"x" * 1024

            try:
                streamed = await http.post(path, content=chunks())
            except httpx.HTTPError:
                pass  # the server closed the connection while the client still sent: a refusal too
            else:
                assert assert_problem(streamed, 413, "too-large")["limit"] == 8192, path
            assert sent < 1000 * 1024, path  # the server stopped reading long before the end
        # An authenticated route still takes the configured limit (1 MiB by default).
        task = {"url": HOOK, "body": "x" * 20_000}
        accepted = await http.post("/v1/queues/q/tasks", json=task, headers=bearer(token))
        assert accepted.status_code == 201, accepted.text
