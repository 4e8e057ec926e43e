"""After 20 failed authentications (401s) within a minute from one address, that address gets
429 for a minute, a valid token too; other addresses are not held up. The limiter on a virtual
clock; then the real app, over a socket, from 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.api.conftest import assert_problem
from tests.support.servers import TEST_SECRET, running_app
from workly.config import Settings
from workly.web.auth_failures import AuthFailures

TOKEN = "auth-failures-token-aaaaaaaaaaaaaaaa"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_twentieth_failure_within_a_minute_blocks_the_address_for_a_minute() -> None:
    clock = Clock()
    failures = AuthFailures(clock)
    for _ in range(19):
        failures.failed("10.0.0.1")
        clock.now += 1
    assert failures.blocked_for("10.0.0.1") == 0
    failures.failed("10.0.0.1")
    assert failures.blocked_for("10.0.0.1") == 60
    assert failures.blocked_for("10.0.0.2") == 0  # another address is not held up
    clock.now += 59.5
    assert failures.blocked_for("10.0.0.1") == 0.5
    clock.now += 0.5
    assert failures.blocked_for("10.0.0.1") == 0


def test_failures_spread_over_more_than_a_minute_never_block() -> None:
    clock = Clock()
    failures = AuthFailures(clock)
    for _ in range(100):
        failures.failed("10.0.0.1")
        clock.now += 3.2  # 20 failures span 60.8 s: never 20 within a minute
    assert failures.blocked_for("10.0.0.1") == 0


def test_a_flood_of_addresses_is_remembered_within_a_bound() -> None:
    failures = AuthFailures(Clock(), limit=1, max_addresses=100)
    for n in range(1000):
        failures.failed(f"10.0.{n // 256}.{n % 256}")
    assert len(failures._addresses) == 100
    assert failures.blocked_for("10.0.3.231") > 0 and failures.blocked_for("10.0.0.0") == 0


@pytest.fixture
async def http(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=TOKEN
    )
    async with running_app(settings) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        yield client


async def test_the_app_answers_429_to_an_address_that_failed_20_times(http: httpx.AsyncClient) -> None:
    good = {"authorization": f"Bearer {TOKEN}"}
    for _ in range(20):
        assert_problem(await http.get("/v1/queues", headers={"authorization": "Bearer guess"}), 401)
    refused = await http.get("/v1/queues", headers=good)
    body = assert_problem(refused, 429, "too-many-failures")
    assert refused.headers["retry-after"] == "60" and body["retry_after"] == 60
    assert (await http.get("/health/live")).status_code == 429  # every request of that address


async def test_wrong_tokens_typed_into_the_login_form_count_too(http: httpx.AsyncClient) -> None:
    origin = {"origin": str(http.base_url).rstrip("/")}
    for _ in range(20):
        failed = await http.post("/ui/login", data={"token": "guess", "next": "/ui"}, headers=origin)
        assert failed.status_code == 401
    refused = await http.post("/ui/login", data={"token": TOKEN, "next": "/ui"}, headers=origin)
    assert_problem(refused, 429, "too-many-failures")
