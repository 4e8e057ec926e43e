"""The dashboard's endpoint and event pages in-process, on both backends: what they show
(health, failure streak, deliveries), the Enable and Disable buttons and the guards in front
of them, escaping, and what they refuse.

tests/e2e/test_dashboard_webhooks.py drives the same pages in a real headless Chromium.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.receiver import Receiver, running_receiver
from tests.support.servers import AUTH, TEST_SECRET, TEST_TOKEN, in_process
from tests.ui.helpers import (
    CROSS_SITE,
    ESCAPED,
    FOREIGN_ORIGINS,
    HOOK,
    SCRIPT,
    UNPARSABLE_ORIGIN,
    assert_refused_as_foreign,
    log_in,
    origin,
    row,
)
from workly.config import Settings
from workly.ui import webhook_pages


async def create_endpoint(http: httpx.AsyncClient, url: str = HOOK, **fields: Any) -> dict[str, Any]:
    response = await http.post("/v1/endpoints", json={"url": url, **fields}, headers=AUTH)
    assert response.status_code == 201, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def publish(
    http: httpx.AsyncClient, event_type: str = "order.created", **fields: Any
) -> dict[str, Any]:
    body = {"type": event_type, **fields}
    if "payload_base64" not in body:
        body.setdefault("payload", {})
    response = await http.post("/v1/events", json=body, headers=AUTH)
    assert response.status_code == 201, response.text
    event: dict[str, Any] = response.json()
    return event


async def api_endpoint(http: httpx.AsyncClient, endpoint_id: str) -> dict[str, Any]:
    response = await http.get(f"/v1/endpoints/{endpoint_id}", headers=AUTH)
    assert response.status_code == 200, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


def badge(html: str) -> str:
    """The health badge's state, checked to be both its text and its data-health."""
    found = re.search(r'<span class="badge health-(\w+)" data-health="(\w+)"[^>]*>(\w+)</span>', html)
    assert found is not None, "no health badge"
    assert len(set(found.groups())) == 1, found.group(0)
    return found.group(1)


def field(html: str, name: str) -> str:
    """The text of the element with data-field="name" (tags stripped)."""
    found = re.search(rf'data-field="{name}"[^>]*>(.*?)</td>', html, re.S)
    assert found is not None, f"no field {name}"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


async def test_without_a_session_the_pages_go_to_login_and_the_buttons_are_refused(
    http: httpx.AsyncClient,
) -> None:
    endpoint = await create_endpoint(http)
    for path, quoted in [
        ("/ui/endpoints", "%2Fui%2Fendpoints"),
        (f"/ui/endpoints/{endpoint['id']}", f"%2Fui%2Fendpoints%2F{endpoint['id']}"),
        ("/ui/events", "%2Fui%2Fevents"), ("/ui/events/evt_x", "%2Fui%2Fevents%2Fevt_x"),
    ]:  # fmt: skip
        response = await http.get(path)
        assert (response.status_code, response.headers["location"]) == (303, f"/ui/login?next={quoted}")
    for action in ("disable", "enable"):
        posted = await http.post(f"/ui/endpoints/{endpoint['id']}/{action}", headers=origin(http))
        assert posted.status_code == 401
    assert (await api_endpoint(http, endpoint["id"]))["enabled"] is True


async def test_the_endpoints_page_lists_each_endpoint_with_its_health_and_a_button(
    http: httpx.AsyncClient,
) -> None:
    mine = await create_endpoint(
        http, description="orders", event_types=["order.*", "invoice.paid"], tenant="acme"
    )
    every = await create_endpoint(http, "http://127.0.0.1:9/every")
    await log_in(http)
    page = await http.get("/ui/endpoints")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert '<a href="/ui/endpoints">Endpoints</a>' in page.text  # in the navigation
    shown = row(page.text, "data-endpoint", mine["id"])
    assert badge(shown) == "healthy"
    assert field(shown, "streak") == "0" and field(shown, "last-success") == "never"
    assert HOOK in shown and "orders" in shown and "acme" in shown
    assert "<code>order.*</code> <code>invoice.paid</code>" in shown
    assert f'action="/ui/endpoints/{mine["id"]}/disable?to=list"' in shown and ">Disable<" in shown
    assert "every type" in row(page.text, "data-endpoint", every["id"])
    # The tenant filter.
    acme = (await http.get("/ui/endpoints", params={"tenant": "acme"})).text
    assert mine["id"] in acme and every["id"] not in acme
    none = (await http.get("/ui/endpoints", params={"tenant": "nobody"})).text
    assert "No endpoints of this tenant." in none


async def test_disable_then_enable_from_the_list_and_from_the_endpoint_page(http: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(http)
    path = f"/ui/endpoints/{endpoint['id']}"
    await log_in(http)

    disabled = await http.post(f"{path}/disable?to=list", headers=origin(http))
    assert (disabled.status_code, disabled.headers["location"]) == (303, "/ui/endpoints?done=disabled")
    state = await api_endpoint(http, endpoint["id"])
    assert state["enabled"] is False and state["health"]["state"] == "disabled"
    listing = (await http.get(disabled.headers["location"])).text
    assert "Disabled: it gets no new events" in listing
    shown = row(listing, "data-endpoint", endpoint["id"])
    assert badge(shown) == "disabled" and f'{path}/enable?to=list"' in shown and ">Enable<" in shown
    page = (await http.get(path)).text
    assert 'id="disabled-reason">disabled by hand (API, CLI or dashboard)<' in page

    enabled = await http.post(f"{path}/enable", headers=origin(http))
    assert (enabled.status_code, enabled.headers["location"]) == (303, f"{path}?done=enabled")
    assert (await api_endpoint(http, endpoint["id"]))["enabled"] is True
    page = (await http.get(enabled.headers["location"])).text
    assert "Enabled: it receives new events" in page and badge(page) == "healthy"
    assert f'action="{path}/disable"' in page

    # Pressed twice: still a redirect, nothing else changes.
    again = await http.post(f"{path}/enable", headers=origin(http))
    assert again.status_code == 303 and (await api_endpoint(http, endpoint["id"]))["enabled"] is True


@pytest.mark.parametrize("headers", [*FOREIGN_ORIGINS, UNPARSABLE_ORIGIN, CROSS_SITE])
async def test_the_buttons_refuse_posts_from_other_origins_and_change_nothing(
    http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    endpoint = await create_endpoint(http)
    stopped = await create_endpoint(http)
    await http.post(f"/v1/endpoints/{stopped['id']}/disable", headers=AUTH)
    await log_in(http)
    for path in (f"/ui/endpoints/{endpoint['id']}/disable", f"/ui/endpoints/{stopped['id']}/enable?to=list"):
        assert_refused_as_foreign(await http.post(path, headers=headers), headers, path)
    assert (await api_endpoint(http, endpoint["id"]))["enabled"] is True
    assert (await api_endpoint(http, stopped["id"]))["enabled"] is False


async def test_the_event_page_lists_its_deliveries_with_links(http: httpx.AsyncClient) -> None:
    orders = await create_endpoint(http, event_types=["order.*"])
    every = await create_endpoint(http, "http://127.0.0.1:9/every")
    await create_endpoint(http, "http://127.0.0.1:9/other", event_types=["user.created"])
    event = await publish(http, payload={"id": 7}, key="k1")
    nobody = await publish(http, "user.deleted", tenant="acme")
    await log_in(http)

    page = (await http.get(f"/ui/events/{event['id']}")).text
    assert 'id="type"><code>order.created</code>' in page
    deliveries = {d["endpoint_id"]: d["task_id"] for d in event["deliveries"]}
    assert set(deliveries) == {orders["id"], every["id"]}
    assert len(re.findall(r"<tr data-delivery=", page)) == 2
    for endpoint_id, task_id in deliveries.items():
        shown = row(page, "data-delivery", task_id)
        assert f'<a href="/ui/endpoints/{endpoint_id}">{endpoint_id}</a>' in shown
        assert f'<a href="/ui/tasks/{task_id}">{task_id}</a>' in shown
        assert field(shown, "status") == "ready" and field(shown, "attempts") == "0"
    assert "&#34;id&#34;: 7" in page  # the payload, indented JSON

    listing = (await http.get("/ui/events")).text
    assert '<a href="/ui/events">Events</a>' in listing
    assert "2 ready" in row(listing, "data-event", event["id"])
    assert "No endpoint took this event" in (await http.get(f"/ui/events/{nobody['id']}")).text
    # Filters: by type, by tenant; one that cannot be a type lists every event.
    by_type = (await http.get("/ui/events", params={"type": "user.deleted"})).text
    assert nobody["id"] in by_type and event["id"] not in by_type
    by_tenant = (await http.get("/ui/events", params={"tenant": "acme"})).text
    assert nobody["id"] in by_tenant and event["id"] not in by_tenant
    broken = (await http.get("/ui/events", params={"type": "<x>"})).text
    assert nobody["id"] in broken and event["id"] in broken

    # The endpoint's page lists its delivery task, linked to the task and the event; the task
    # page links back to both.
    endpoint_page = (await http.get(f"/ui/endpoints/{orders['id']}")).text
    shown = row(endpoint_page, "data-task", deliveries[orders["id"]])
    assert (
        f'href="/ui/tasks/{deliveries[orders["id"]]}"' in shown
        and f'href="/ui/events/{event["id"]}"' in shown
    )
    task_page = (await http.get(f"/ui/tasks/{deliveries[orders['id']]}")).text
    assert (
        f'href="/ui/endpoints/{orders["id"]}"' in task_page
        and f'href="/ui/events/{event["id"]}"' in task_page
    )
    failed_only = (await http.get(f"/ui/endpoints/{orders['id']}", params={"status": "failed"})).text
    assert "No delivery tasks match." in failed_only


async def test_pages_escape_what_api_clients_wrote(http: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(
        http, f"{HOOK}?q=<b>x</b>", description=SCRIPT, tenant=SCRIPT, headers={"X-Note": SCRIPT}
    )
    event = await publish(http, payload={"html": SCRIPT}, tenant=SCRIPT, key=SCRIPT)
    text = await publish(http, payload_base64="PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==")
    await log_in(http)
    pages = [
        "/ui/endpoints", f"/ui/endpoints/{endpoint['id']}", "/ui/events", f"/ui/events/{event['id']}",
        f"/ui/events/{text['id']}", f"/ui/tasks/{event['deliveries'][0]['task_id']}",
        "/ui/events?" + "tenant=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/ui/endpoints?" + "tenant=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    ]  # fmt: skip
    for path in pages:
        page = await http.get(path)
        assert page.status_code == 200, path
        assert "<script" not in page.text and "<b>x" not in page.text, path
    endpoint_page = (await http.get(f"/ui/endpoints/{endpoint['id']}")).text
    assert f'id="description">{ESCAPED}<' in endpoint_page
    assert "?q=&lt;b&gt;x&lt;/b&gt;" in endpoint_page
    assert ESCAPED in (await http.get(f"/ui/events/{text['id']}")).text


async def test_unknown_ids_bad_links_and_bad_filters_answer_pages_not_crashes(
    http: httpx.AsyncClient,
) -> None:
    await log_in(http)
    for path in ("/ui/endpoints/ep_nope", "/ui/endpoints/%00", "/ui/endpoints/" + "x" * 5000):
        missing = await http.get(path)
        assert missing.status_code == 404 and "There is no such endpoint" in missing.text, path
        assert "x" * 100 not in missing.text
    for path in ("/ui/events/evt_nope", "/ui/events/%00", "/ui/events/" + "x" * 5000):
        missing = await http.get(path)
        assert missing.status_code == 404 and "There is no such event" in missing.text, path
    for path in (
        "/ui/endpoints/ep_nope/disable",
        "/ui/endpoints/%00/enable",
        "/ui/endpoints/" + "x" * 500 + "/enable",
    ):
        response = await http.post(path, headers=origin(http))
        assert response.status_code == 404 and response.headers["content-type"].startswith("text/html"), path
    for path in ("/ui/endpoints", "/ui/events", "/ui/endpoints/ep_nope"):
        broken = await http.get(path, params={"cursor": "garbage!"})
        assert broken.status_code in (400, 404) and "That did not work" in broken.text, path
    assert (await http.get("/ui/endpoints", params={"cursor": "garbage!"})).status_code == 400
    for params in (
        {"tenant": "t" * 500},
        {"tenant": "a\x01b"},
        {"tenant": ""},
        {"type": "x" * 500, "status": "no"},
    ):
        for path in ("/ui/endpoints", "/ui/events"):
            listed = await http.get(path, params=params)
            assert listed.status_code == 200 and listed.headers["content-type"].startswith("text/html")


async def test_lists_page_older_entries_keeping_their_filters(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhook_pages, "PAGE_SIZE", 2)
    endpoints = [await create_endpoint(http, tenant="acme") for _ in range(3)]
    events = [await publish(http, tenant="acme") for _ in range(3)]
    await log_in(http)
    first = (await http.get("/ui/endpoints", params={"tenant": "acme"})).text
    assert [e["id"] in first for e in endpoints] == [False, True, True]  # newest first
    older = re.search(r'<a href="([^"]+)" rel="next">', first)
    assert older is not None and "tenant=acme" in older.group(1)
    second = (await http.get(older.group(1).replace("&amp;", "&"))).text
    assert endpoints[0]["id"] in second and 'rel="next"' not in second
    first_events = (await http.get("/ui/events", params={"tenant": "acme", "type": "order.created"})).text
    older = re.search(r'<a href="([^"]+)" rel="next">', first_events)
    assert older is not None
    second_events = (await http.get(older.group(1).replace("&amp;", "&"))).text
    assert events[0]["id"] in second_events and events[2]["id"] not in second_events


async def test_an_endpoints_queue_on_the_overview_links_to_it_instead_of_a_pause_button(
    http: httpx.AsyncClient,
) -> None:
    endpoint = await create_endpoint(http)
    await log_in(http)
    overview = (await http.get("/ui")).text
    shown = row(overview, "data-queue", endpoint["id"])
    assert f'<a href="/ui/endpoints/{endpoint["id"]}">endpoint</a>' in shown and "Pause" not in shown
    # Its queue's pause is the API's 409 (enable or disable the endpoint), as a page.
    refused = await http.post(f"/ui/queues/{endpoint['id']}/pause", headers=origin(http))
    assert refused.status_code == 409 and refused.headers["content-type"].startswith("text/html")
    assert (await api_endpoint(http, endpoint["id"]))["enabled"] is True


# --- health, with deliveries for real ---------------------------------------------------------


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver() as running:
        yield running


@pytest.fixture
async def delivering(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its dispatcher, deliveries to 127.0.0.1 allowed; a breaker that opens after
    3 failures and stays open for an hour (so the test sees it open)."""
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, api_tokens=TEST_TOKEN, poll_interval=0.2,
        outbound_allow="127.0.0.0/8", breaker_threshold=3, breaker_cooldown=3600,
    )  # fmt: skip
    async with in_process(settings) as (_, client):
        yield client


async def wait_for_health(
    http: httpx.AsyncClient, endpoint_id: str, state: str, failures: int, timeout: float = 15.0
) -> dict[str, Any]:
    """Poll the API (observable state, not a sleep) until the endpoint's health is this."""
    import asyncio

    async with asyncio.timeout(timeout):
        while True:
            health: dict[str, Any] = (await api_endpoint(http, endpoint_id))["health"]
            if (health["state"], health["consecutive_failures"]) == (state, failures):
                return health
            await asyncio.sleep(0.05)


async def test_the_pages_show_healthy_failing_and_open_endpoints_with_their_failure_streaks(
    delivering: httpx.AsyncClient, receiver: Receiver
) -> None:
    http = delivering
    fine = await create_endpoint(http, receiver.url("/fine"), event_types=["order.*"])
    failing = await create_endpoint(http, receiver.url("/failing"), event_types=["order.*"], max_attempts=1)
    down = await create_endpoint(
        http, receiver.url("/down"), event_types=["order.*"], max_attempts=3, min_backoff=0, max_backoff=0
    )
    receiver.script("/failing", [500])
    receiver.script("/down", [503, 503, 503])
    event = await publish(http, payload={"n": 1})
    await receiver.wait_for("/fine", 1)
    await wait_for_health(http, fine["id"], "healthy", 0)
    await wait_for_health(http, failing["id"], "failing", 1)
    open_health = await wait_for_health(http, down["id"], "open", 3)
    assert open_health["probe_at"] is not None
    await log_in(http)

    listing = (await http.get("/ui/endpoints")).text
    for endpoint, state, streak in ((fine, "healthy", "0"), (failing, "failing", "1"), (down, "open", "3")):
        shown = row(listing, "data-endpoint", endpoint["id"])
        assert badge(shown) == state and field(shown, "streak") == streak
    assert field(row(listing, "data-endpoint", fine["id"]), "last-success") != "never"
    assert field(row(listing, "data-endpoint", down["id"]), "last-success") == "never"
    assert "breaker open: next probe at" in row(listing, "data-endpoint", down["id"])
    down_page = (await http.get(f"/ui/endpoints/{down['id']}")).text
    assert 'id="streak">3<' in down_page and "Next probe" in down_page and "Failing since" in down_page

    event_page = (await http.get(f"/ui/events/{event['id']}")).text
    expected = {fine["id"]: ("succeeded", "1"), failing["id"]: ("failed", "1"), down["id"]: ("failed", "3")}
    for delivery in event["deliveries"]:
        shown = row(event_page, "data-delivery", delivery["task_id"])
        assert (field(shown, "status"), field(shown, "attempts")) == expected[delivery["endpoint_id"]]


async def test_the_endpoint_page_shows_its_retry_policy(http: httpx.AsyncClient) -> None:
    strict = await create_endpoint(http, stop_on=["4xx", "503"], deadline=600)
    lenient = await create_endpoint(http, stop_on=[])
    await log_in(http)
    page = (await http.get(f"/ui/endpoints/{strict['id']}")).text
    assert "4xx, 503" in page and "600 s after a task&#39;s creation (or redrive)" in page
    page = (await http.get(f"/ui/endpoints/{lenient['id']}")).text
    assert "nothing: every failure is retried" in page
