"""What a page in someone's browser can make that browser send, over a real socket: writes
from another site are refused on every server, and a server without tokens (`workly dev`)
answers only to IP addresses and localhost (DNS rebinding)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.api.conftest import HOOK, assert_problem
from tests.support.servers import AUTH, TEST_SECRET, TEST_TOKEN, running_app
from workly.config import Settings
from workly.web.browser_guards import is_local_host


@pytest.fixture(params=["anonymous", "tokens"])
async def http(request: pytest.FixtureRequest, sqlite_url: str) -> AsyncIterator[httpx.AsyncClient]:
    tokens = TEST_TOKEN if request.param == "tokens" else None
    settings = Settings(
        database_url=sqlite_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=tokens
    )
    async with (
        running_app(settings) as base_url,
        httpx.AsyncClient(base_url=base_url, headers=AUTH) as client,
    ):
        yield client


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "null"},
        {"origin": "http://127.0.0.1:1"},  # same host, another port: another origin
        {"origin": "http://[::1"},  # not even a URL
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
    ],
)
async def test_a_write_from_another_site_is_refused_and_changes_nothing(
    http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    task = (await http.post("/v1/queues/q/tasks", json={"url": HOOK})).json()
    for method, path in [
        ("POST", "/v1/queues/q/pause"), ("POST", "/v1/queues/q/purge"),
        ("POST", f"/v1/tasks/{task['id']}/cancel"), ("POST", "/v1/queues/q/tasks"),
        ("DELETE", "/v1/queues/q"), ("PATCH", "/v1/queues/q"),
    ]:  # fmt: skip
        response = await http.request(method, path, headers=headers, json={"url": HOOK})
        assert_problem(response, 403, "cross-site")
    queue = (await http.get("/v1/queues/q")).json()
    assert queue["paused"] is False and queue["counts"]["ready"] == 1
    assert (await http.get("/v1/queues/q", headers=headers)).status_code == 200  # reading is not refused


async def test_same_origin_and_non_browser_writes_pass(http: httpx.AsyncClient) -> None:
    same = {"origin": str(http.base_url).rstrip("/"), "sec-fetch-site": "same-origin"}
    assert (await http.post("/v1/queues/q/tasks", json={"url": HOOK}, headers=same)).status_code == 201
    assert (await http.post("/v1/queues/q/tasks", json={"url": HOOK})).status_code == 201  # curl, SDKs
    assert (await http.post("/v1/queues/q/pause", headers={"sec-fetch-site": "none"})).status_code == 200


async def test_without_tokens_only_addresses_and_localhost_are_answered(
    http: httpx.AsyncClient, request: pytest.FixtureRequest
) -> None:
    port = http.base_url.port
    rebound = await http.get("/v1/queues", headers={"host": f"rebind.attacker.example:{port}"})
    if "anonymous" in request.node.callspec.id:
        assert_problem(rebound, 403, "host-not-allowed")
        assert (await http.get("/ui/", headers={"host": "evil.example"})).status_code == 403
    else:  # with tokens a rebound page has no token and no session: nothing to gain
        assert rebound.status_code == 200
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert (await http.get("/v1/queues", headers={"host": host})).status_code == 200


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1:7337", True), ("localhost", True), ("app.localhost:80", True), ("[::1]:7337", True),
        ("10.0.0.5", True), (None, True), ("evil.example", False), ("localhost.evil.example", False),
        ("127.0.0.1.nip.io", False), ("", False), ("[::1", False),
    ],
)  # fmt: skip
def test_which_host_headers_name_this_machine_by_address(host: str | None, local: bool) -> None:
    assert is_local_host(host) is local
