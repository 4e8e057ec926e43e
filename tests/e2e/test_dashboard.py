"""The dashboard in a real headless Chromium (Debian's, driven by Playwright) against `workly
dev`'s app with an API token required: log in, see a delivered task, retry a failed one.

The app is served in this process on a real socket (tests/e2e/cli.py), one server for the
module, each test in queues of its own; the test that counts every task on the server has a
server of its own. The browser may only reach 127.0.0.1: every other request is aborted
before it leaves.
"""

from __future__ import annotations

import pytest

from tests.e2e.cli import InProcessServer
from tests.e2e.conftest import (
    E2E,
    enqueue,
    get_task,
    wait_for_status,
)
from tests.support.servers import TEST_TOKEN

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.async_api")
# A chart's minutes added up: Playwright evaluates this itself (the page runs no script).
SUM = "(minutes, field) => minutes.reduce((sum, m) => sum + Number(m.dataset[field]), 0)"


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


async def test_log_in_see_a_delivered_task_and_retry_a_failed_one(
    fresh_e2e: E2E, page: tuple[playwright.Page, list[str]]
) -> None:
    e2e = fresh_e2e  # the task list counts every succeeded task: only this test's may be there
    tab, _ = page
    expect = playwright.expect
    base = e2e.server.base_url
    e2e.receiver.script("/fail", [500])
    delivered = await enqueue(e2e.client, "web", {"url": e2e.receiver.url("/ok"), "body": {"n": 1}})
    failing = await enqueue(e2e.client, "web", {"url": e2e.receiver.url("/fail"), "max_attempts": 1})
    await wait_for_status(e2e.client, delivered["id"], "succeeded")
    await wait_for_status(e2e.client, failing["id"], "failed")

    # Not logged in: the dashboard sends the browser to its login page; a wrong token is refused.
    await tab.goto(f"{base}/ui")
    await expect(tab).to_have_url(f"{base}/ui/login?next=%2Fui")
    await tab.get_by_label("API token").fill("not-the-token")
    await tab.get_by_role("button", name="Log in").click()
    await expect(tab.get_by_role("alert")).to_contain_text("not one of this server's API tokens")
    await tab.get_by_label("API token").fill(TEST_TOKEN)
    await tab.get_by_role("button", name="Log in").click()

    # The queue overview: one delivered, one failed.
    await expect(tab).to_have_url(f"{base}/ui")
    row = tab.locator('tr[data-queue="web"]')
    await expect(row.locator('td[data-status="succeeded"]')).to_have_text("1")
    await expect(row.locator('td[data-status="failed"]')).to_have_text("1")
    await expect(row.locator('td[data-status="delivered"]')).to_have_text("1")

    # The task list, filtered to succeeded tasks, leads to the delivered task and its attempt.
    await tab.get_by_role("link", name="Tasks").click()
    await tab.get_by_label("Status").select_option("succeeded")
    await tab.get_by_role("button", name="Show").click()
    await expect(tab.locator("tr[data-task]")).to_have_count(1)
    await tab.get_by_role("link", name=delivered["id"]).click()
    await expect(tab.locator("#status")).to_have_text("succeeded")
    await expect(tab.locator('tr[data-row="1"]')).to_contain_text("204")

    # The failed task: its attempt shows the receiver's answer; Retry re-enqueues it.
    await tab.goto(f"{base}/ui/tasks?status=failed")
    await tab.get_by_role("link", name=failing["id"]).click()
    await expect(tab.locator('tr[data-row="1"]')).to_contain_text("500")
    await expect(tab.locator('tr[data-row="1"] pre')).to_have_text("status 500")
    await tab.get_by_role("button", name="Retry").click()
    await expect(tab.get_by_role("status")).to_have_text("Re-enqueued: the task is due now.")
    await e2e.receiver.wait_for("/fail", 2)  # delivered again; the receiver answers 204 now
    await wait_for_status(e2e.client, failing["id"], "succeeded")
    await tab.reload()
    await expect(tab.locator("#status")).to_have_text("succeeded")
    await expect(tab.locator('tr[data-row="2"]')).to_contain_text("204")

    # Pause from the overview reaches the API; log out ends the session.
    await tab.get_by_role("link", name="Queues").click()
    await tab.locator('tr[data-queue="web"]').get_by_role("button", name="Pause").click()
    await expect(tab.locator('tr[data-queue="web"] td.state-paused')).to_have_text("paused")
    assert (await e2e.client.get("/v1/queues/web")).json()["paused"] is True
    await tab.get_by_role("button", name="Log out").click()
    await tab.goto(f"{base}/ui/tasks")
    await expect(tab).to_have_url(f"{base}/ui/login?next=%2Fui%2Ftasks")
    assert (await get_task(e2e.client, failing["id"]))["attempts"] == 2  # numbered on across the retry


async def test_a_queues_charts_show_the_deliveries_made(
    e2e: E2E, page: tuple[playwright.Page, list[str]]
) -> None:
    """The queue's page draws what the dispatcher did: every delivery and failed attempt of
    the test in the deliveries chart, and a p50 and p95 for the minutes they were in."""
    tab, _ = page
    expect = playwright.expect
    base = e2e.server.base_url
    e2e.receiver.script("/down", [500, 500])
    made = [await enqueue(e2e.client, "charts", {"url": e2e.receiver.url("/ok")}) for _ in range(5)]
    failing = [
        await enqueue(e2e.client, "charts", {"url": e2e.receiver.url("/down"), "max_attempts": 1})
        for _ in range(2)
    ]
    for task in made:
        await wait_for_status(e2e.client, task["id"], "succeeded")
    for task in failing:
        await wait_for_status(e2e.client, task["id"], "failed")

    await tab.goto(f"{base}/ui/login?next=%2Fui")
    await tab.get_by_label("API token").fill(TEST_TOKEN)
    await tab.get_by_role("button", name="Log in").click()
    await tab.locator('tr[data-queue="charts"]').get_by_role("link", name="charts").click()
    await expect(tab).to_have_url(f"{base}/ui/queues/charts")
    await expect(tab.locator('#counts a[data-status="succeeded"]')).to_have_text("5 succeeded")
    minutes = tab.locator("#deliveries-chart g.minute")
    await expect(minutes).to_have_count(60)
    assert await minutes.evaluate_all(SUM, "succeeded") == 5
    assert await minutes.evaluate_all(SUM, "failures") == 2
    busy = await minutes.evaluate_all(
        "ms => ms.filter(m => m.dataset.succeeded !== '0').map(m => m.dataset.minute)"
    )
    assert 1 <= len(busy) <= 2  # the test's minute, or two across a minute's turn
    for series in ("p50", "p95"):
        drawn = await tab.locator(f'#latency-chart circle[data-series="{series}"]').evaluate_all(
            "points => points.map(p => p.dataset.minute)"
        )
        assert set(busy) <= set(drawn)


async def test_the_api_reference_renders_with_nothing_from_elsewhere(
    e2e: E2E, page: tuple[playwright.Page, list[str]]
) -> None:
    """/docs in a browser that may reach 127.0.0.1 only: Swagger UI comes from this server
    (as on a machine without internet), every operation shows, no request went elsewhere and
    the page's policy refused nothing."""
    tab, _ = page
    failed: list[str] = []
    console: list[str] = []
    tab.on("requestfailed", lambda request: failed.append(request.url))
    tab.on("console", lambda message: console.append(message.text))
    base = e2e.server.base_url
    await tab.goto(f"{base}/docs")
    await playwright.expect(tab).to_have_url(f"{base}/ui/login?next=%2Fdocs")
    await tab.get_by_label("API token").fill(TEST_TOKEN)
    await tab.get_by_role("button", name="Log in").click()
    await playwright.expect(tab).to_have_url(f"{base}/docs")
    operations = tab.locator(".opblock")
    await playwright.expect(operations.first).to_be_visible()
    paths = (await (await e2e.client.get("/openapi.json")).aread()).count(b'"operationId"')
    await playwright.expect(operations).to_have_count(paths)
    assert failed == []
    assert not [line for line in console if "Content Security Policy" in line], console
