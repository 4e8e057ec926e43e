"""The dashboard's endpoint and event pages in a real headless Chromium (Debian's, driven by
Playwright) against `workly dev`'s app with an API token required: endpoints and an event
made through the API, their health and failure streaks seen in the browser, Disable and Enable
pressed there, an event's deliveries, and a description holding a script shown as text.

The app is served in this process on a real socket (tests/e2e/cli.py), one server for the
module. The browser may only reach 127.0.0.1: every other request is aborted before it leaves.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from tests.e2e.cli import InProcessServer
from tests.e2e.conftest import E2E, create_endpoint, wait_for_status
from tests.support.servers import TEST_TOKEN

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.async_api")

SCRIPT = "<script>alert('endpoint')</script>"
# A chart's minutes added up: Playwright evaluates this itself (the page runs no script).
SUM = "(minutes, field) => minutes.reduce((sum, m) => sum + Number(m.dataset[field]), 0)"


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


async def endpoint_state(client: httpx.AsyncClient, endpoint_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/endpoints/{endpoint_id}")
    assert response.status_code == 200, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def wait_for_streak(
    client: httpx.AsyncClient, endpoint_id: str, failures: int, timeout: float = 15.0
) -> dict[str, Any]:
    """Poll the API until the endpoint's failure streak is ``failures`` (observable state)."""
    deadline = time.monotonic() + timeout
    while True:
        endpoint = await endpoint_state(client, endpoint_id)
        if endpoint["health"]["consecutive_failures"] == failures:
            return endpoint
        if time.monotonic() >= deadline:
            pytest.fail(f"endpoint {endpoint_id} never failed {failures} times in a row: {endpoint}")
        await asyncio.sleep(0.05)


async def test_endpoints_health_disable_enable_and_an_events_deliveries_in_the_browser(
    e2e: E2E, page: tuple[playwright.Page, list[str]]
) -> None:
    tab, dialogs = page
    expect = playwright.expect
    base, client = e2e.server.base_url, e2e.client
    fine = await create_endpoint(client, e2e.receiver.url("/fine"), event_types=["order.*"], description="ok")
    failing = await create_endpoint(
        client, e2e.receiver.url("/failing"), event_types=["order.*"], description=SCRIPT, tenant=None,
        max_attempts=2, min_backoff=0, max_backoff=0,
    )  # fmt: skip
    e2e.receiver.script("/failing", [500, 500])
    response = await client.post("/v1/events", json={"type": "order.created", "payload": {"n": 1}})
    assert response.status_code == 201, response.text
    event = response.json()
    tasks = {d["endpoint_id"]: d["task_id"] for d in event["deliveries"]}
    assert set(tasks) == {fine["id"], failing["id"]}
    await wait_for_status(client, tasks[fine["id"]], "succeeded")
    await wait_for_status(client, tasks[failing["id"]], "failed")
    assert (await wait_for_streak(client, failing["id"], 2))["health"]["state"] == "failing"

    # Log in, then the navigation leads to the endpoints and their health.
    await tab.goto(f"{base}/ui/endpoints")
    await expect(tab).to_have_url(f"{base}/ui/login?next=%2Fui%2Fendpoints")
    await tab.get_by_label("API token").fill(TEST_TOKEN)
    await tab.get_by_role("button", name="Log in").click()
    await expect(tab).to_have_url(f"{base}/ui/endpoints")
    await tab.get_by_role("link", name="Queues").click()
    await tab.locator("header nav").get_by_role("link", name="Endpoints").click()
    await expect(tab).to_have_url(f"{base}/ui/endpoints")
    good_row = tab.locator(f'tr[data-endpoint="{fine["id"]}"]')
    bad_row = tab.locator(f'tr[data-endpoint="{failing["id"]}"]')
    await expect(good_row.locator(".badge")).to_have_text("healthy")
    await expect(good_row.locator('[data-field="streak"]')).to_have_text("0")
    await expect(good_row.locator('[data-field="last-success"]')).not_to_have_text("never")
    await expect(bad_row.locator(".badge")).to_have_text("failing")
    await expect(bad_row.locator(".badge")).to_be_visible()
    await expect(bad_row.locator('[data-field="streak"]')).to_have_text("2")
    await expect(bad_row.locator('[data-field="last-success"]')).to_have_text("never")
    await expect(bad_row).to_contain_text(e2e.receiver.url("/failing"))
    await expect(bad_row).to_contain_text("order.*")
    # The description with a script is shown as text, and no script ran.
    await expect(bad_row.locator(".description")).to_have_text(SCRIPT)

    # Disable from the list: the notice, the badge, and the API agree; then Enable.
    await bad_row.get_by_role("button", name="Disable").click()
    await expect(tab.get_by_role("status")).to_contain_text("Disabled: it gets no new events")
    await expect(bad_row.locator(".badge")).to_have_text("disabled")
    disabled = await endpoint_state(client, failing["id"])
    assert disabled["enabled"] is False and disabled["health"]["state"] == "disabled"
    await bad_row.get_by_role("button", name="Enable").click()
    await expect(tab.get_by_role("status")).to_contain_text("Enabled: it receives new events")
    await expect(bad_row.get_by_role("button", name="Disable")).to_be_visible()
    assert (await endpoint_state(client, failing["id"]))["enabled"] is True

    # The endpoint's own page: its fields, and Disable there too; its delivery task links on.
    await bad_row.get_by_role("link", name=failing["id"]).click()
    await expect(tab).to_have_url(f"{base}/ui/endpoints/{failing['id']}")
    await expect(tab.locator("#description")).to_have_text(SCRIPT)
    await expect(tab.locator("#url")).to_have_text(e2e.receiver.url("/failing"))
    # Its chart of the last hour: the two failed attempts, nothing delivered.
    minutes = tab.locator("#deliveries-chart g.minute")
    await expect(minutes).to_have_count(60)
    assert await minutes.evaluate_all(SUM, "failures") == 2
    assert await minutes.evaluate_all(SUM, "succeeded") == 0
    await tab.get_by_role("button", name="Disable").click()
    await expect(tab.get_by_role("status")).to_contain_text("Disabled")
    await expect(tab.locator("#health .badge")).to_have_text("disabled")
    await expect(tab.locator("#disabled-reason")).to_have_text("disabled by hand (API, CLI or dashboard)")
    assert (await endpoint_state(client, failing["id"]))["enabled"] is False
    await tab.get_by_role("button", name="Enable").click()
    await expect(tab.locator("#health .badge")).not_to_have_text("disabled")
    assert (await endpoint_state(client, failing["id"]))["enabled"] is True
    task_row = tab.locator(f'tr[data-task="{tasks[failing["id"]]}"]')
    await expect(task_row.locator(".status")).to_have_text("failed")
    await expect(task_row).to_contain_text("2/2")

    # The events list leads to the event, which lists its deliveries; a task link opens the task.
    await tab.locator("header nav").get_by_role("link", name="Events").click()
    await tab.get_by_role("link", name=event["id"]).click()
    await expect(tab).to_have_url(f"{base}/ui/events/{event['id']}")
    await expect(tab.locator("#type")).to_have_text("order.created")
    await expect(tab.locator("tr[data-delivery]")).to_have_count(2)
    for endpoint_id, status, attempts in ((fine["id"], "succeeded", "1"), (failing["id"], "failed", "2")):
        delivery = tab.locator(f'tr[data-delivery="{tasks[endpoint_id]}"]')
        await expect(delivery).to_contain_text(endpoint_id)
        await expect(delivery.locator('[data-field="status"]')).to_have_text(status)
        await expect(delivery.locator('[data-field="attempts"]')).to_have_text(attempts)
    await (
        tab.locator(f'tr[data-delivery="{tasks[failing["id"]]}"]')
        .get_by_role("link", name=tasks[failing["id"]])
        .click()
    )
    await expect(tab).to_have_url(f"{base}/ui/tasks/{tasks[failing['id']]}")
    await expect(tab.locator("#status")).to_have_text("failed")
    await expect(tab.locator('tr[data-row="2"]')).to_contain_text("500")

    assert dialogs == []  # no script the API's clients wrote ran in the page


async def test_the_catalogue_and_an_endpoints_test_filter_and_replay_buttons_in_the_browser(
    e2e: E2E, page: tuple[playwright.Page, list[str]]
) -> None:
    tab, _ = page
    expect = playwright.expect
    base, client = e2e.server.base_url, e2e.client
    declared = await client.put(
        "/v1/event-types/parcel.shipped",
        json={"description": SCRIPT, "schema": {"type": "object"}, "examples": [{"parcel": 7}]},
    )
    assert declared.status_code in (200, 201), declared.text
    endpoint = await create_endpoint(client, e2e.receiver.url("/routed"), event_types=["parcel.*"])
    await tab.goto(f"{base}/ui/login")
    await tab.get_by_label("API token").fill(TEST_TOKEN)
    await tab.get_by_role("button", name="Log in").click()

    # The catalogue: the type, its description as text, its schema and example on its page.
    await tab.locator("header nav").get_by_role("link", name="Event types").click()
    await expect(tab).to_have_url(f"{base}/ui/event-types")
    type_row = tab.locator('tr[data-type="parcel.shipped"]')
    await expect(type_row).to_contain_text(SCRIPT)
    await type_row.get_by_role("link", name="parcel.shipped").click()
    await expect(tab.locator("#schema")).to_contain_text('"type": "object"')
    await expect(tab.locator("pre.example")).to_contain_text('"parcel": 7')

    # The endpoint's page: send the type's example as a test event; the receiver gets it.
    await tab.goto(f"{base}/ui/endpoints/{endpoint['id']}")
    await tab.get_by_label("Test event").select_option("parcel.shipped")
    await tab.get_by_role("button", name="Send test event").click()
    await expect(tab.get_by_role("status")).to_contain_text("A test event is on its way")
    [received] = await e2e.receiver.wait_for("/routed", 1)
    assert received.body == b'{"parcel":7}'

    # A filter saved there is the API's; a malformed one is refused with what is wrong.
    await tab.get_by_label("Filter (JSON; empty: none)").fill('{"labels.region": "eu"}')
    await tab.get_by_role("button", name="Save filter").click()
    await expect(tab.get_by_role("status")).to_contain_text("Filter saved")
    await expect(tab.locator("#filter")).to_contain_text('"labels.region": "eu"')
    assert (await endpoint_state(client, endpoint["id"]))["filter"] == {"labels.region": "eu"}
    await tab.get_by_label("Filter (JSON; empty: none)").fill('{"labels.region": {"$near": 1}}')
    await tab.get_by_role("button", name="Save filter").click()
    await expect(tab.locator("main")).to_contain_text("unknown operator $near")
    assert (await endpoint_state(client, endpoint["id"]))["filter"] == {"labels.region": "eu"}

    # Replay: what the endpoint received already is not sent again.
    await tab.goto(f"{base}/ui/endpoints/{endpoint['id']}")
    published = await client.post(
        "/v1/events", json={"type": "parcel.shipped", "payload": {"parcel": 8}, "labels": {"region": "eu"}}
    )
    assert published.status_code == 201 and len(published.json()["deliveries"]) == 1  # the filter let it in
    await tab.get_by_role("button", name="Replay missing events").click()
    await expect(tab.get_by_role("status")).to_contain_text("Replay started")
    replays = [
        o for o in (await client.get("/v1/operations")).json()["operations"] if o["action"] == "replay"
    ]
    operation = replays[0]
    async with asyncio.timeout(10):
        while operation["state"] == "running":
            await asyncio.sleep(0.05)  # the operation's answer, polled
            operation = (await client.get(f"/v1/operations/{operation['id']}")).json()
    assert operation["state"] == "succeeded" and operation["changed"] == 0
    got = await e2e.receiver.wait_for("/routed", 2)
    assert [r.body for r in got] == [b'{"parcel":7}', b'{"parcel":8}']
