"""Dashboard sessions kept server-side (workly/sessions.py): a token or an API key logs in;
logging out, revoking the key, removing the token or the 12 hours passing ends the session,
in every process (two apps over one database here, each on the same virtual clock)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import httpx
import pytest

from tests.support.clock import VirtualClock
from tests.support.servers import AUTH, TEST_SECRET, TEST_TOKEN, in_process
from tests.ui.helpers import origin
from workly.config import Settings
from workly.sessions import SESSION_SECONDS

OTHER_TOKEN = "other-token-0123456789abcdef-0123456789"


def settings(database_url: str, tokens: str = TEST_TOKEN) -> Settings:
    return Settings(database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=tokens)


@pytest.fixture
async def two(
    database_url: str, clock: VirtualClock
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Two processes' apps over one database (the second also takes OTHER_TOKEN)."""
    async with AsyncExitStack() as stack:
        _, first = await stack.enter_async_context(in_process(settings(database_url), clock))
        _, second = await stack.enter_async_context(
            in_process(settings(database_url, f"{TEST_TOKEN} {OTHER_TOKEN}"), clock)
        )
        yield first, second


async def login(http: httpx.AsyncClient, credential: str) -> str:
    response = await http.post("/ui/login", data={"token": credential}, headers=origin(http))
    assert response.status_code == 303, response.text
    cookie: str = response.cookies["workly_session"]
    http.cookies.clear()  # each request below says which session it uses
    return cookie


async def opens(http: httpx.AsyncClient, cookie: str) -> bool:
    response = await http.get("/ui/endpoints", headers={"cookie": f"workly_session={cookie}".encode()})
    assert response.status_code in (200, 303), response.text
    return response.status_code == 200


async def test_a_logout_ends_the_session_in_every_process(
    two: tuple[httpx.AsyncClient, httpx.AsyncClient], clock: VirtualClock
) -> None:
    first, second = two
    cookie = await login(first, TEST_TOKEN)
    assert await opens(first, cookie) and await opens(second, cookie)
    out = await first.post("/ui/logout", headers={**origin(first), "cookie": f"workly_session={cookie}"})
    assert out.status_code == 303
    assert not await opens(first, cookie)  # at once where it ended
    clock.advance(0.6)  # past what another process remembers of a session
    assert not await opens(second, cookie)


async def test_a_key_logs_in_and_its_revocation_ends_the_session(
    two: tuple[httpx.AsyncClient, httpx.AsyncClient], clock: VirtualClock
) -> None:
    first, second = two
    made = await first.post("/v1/keys", json={"name": "support", "role": "reader"}, headers=AUTH)
    key = made.json()["key"]
    cookie = await login(second, key)
    assert "wk_" not in cookie and await opens(first, cookie)
    await first.delete(f"/v1/keys/{made.json()['id']}", headers=AUTH)
    assert not await opens(first, cookie)
    clock.advance(0.6)
    assert not await opens(second, cookie)
    refused = await second.post("/ui/login", data={"token": key}, headers=origin(second))
    assert refused.status_code == 401


async def test_removing_a_token_ends_the_sessions_it_opened(
    two: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    first, second = two
    cookie = await login(second, OTHER_TOKEN)
    assert await opens(second, cookie)
    assert not await opens(first, cookie)  # a process without that token


async def test_a_session_ends_after_12_hours(
    two: tuple[httpx.AsyncClient, httpx.AsyncClient], clock: VirtualClock
) -> None:
    first, _ = two
    cookie = await login(first, TEST_TOKEN)
    clock.advance(SESSION_SECONDS - 1)
    assert await opens(first, cookie)
    clock.advance(2)
    assert not await opens(first, cookie)


@pytest.mark.parametrize("cookie", ["", "s1.", "s1." + "A" * 43, "v1.1800000000.abc", "s1.é", "x" * 4000])
async def test_a_cookie_no_login_made_opens_nothing(
    two: tuple[httpx.AsyncClient, httpx.AsyncClient], cookie: str
) -> None:
    assert not await opens(two[0], cookie)


async def test_a_login_is_audited_as_who_logged_in_and_ends_the_earlier_session(
    two: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    first, _ = two
    made = await first.post(
        "/v1/keys", json={"name": "support", "role": "reader", "tenant": "acme"}, headers=AUTH
    )
    earlier = await login(first, TEST_TOKEN)
    again = await first.post(
        "/ui/login",
        data={"token": made.json()["key"]},
        headers={**origin(first), "cookie": f"workly_session={earlier}"},
    )
    assert again.status_code == 303
    assert not await opens(first, earlier)  # the browser's earlier session ended
    entries = (await first.get("/v1/audit", params={"action": "session.login"}, headers=AUTH)).json()[
        "entries"
    ]
    assert [(e["actor"]["type"], e["actor"]["role"], e["target"], e["tenant"]) for e in entries] == [
        ("key", "reader", made.json()["id"], "acme"),
        ("token", "admin", "token", None),
    ]
