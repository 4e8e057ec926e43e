"""The dashboard's schedule pages in a real headless Chromium (Debian's, driven by Playwright)
against `workly dev`'s app with an API token required: a schedule made through the API is
listed with its cron, time zone and next runs; on its page Trigger now makes a task (delivered
for real) that the page then links, Pause leaves it with no next runs, Resume brings them back
and Delete takes it off the list. And a form on another origin that posts to a button is
refused, changing nothing.

The app is served in this process on a real socket (tests/e2e/cli.py), one server for the
module, each test with schedules of its own. The browser may only reach 127.0.0.1: every other
request is aborted before it leaves.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.cli import InProcessServer
from tests.e2e.conftest import E2E, wait_for_status
from tests.support.servers import TEST_TOKEN, free_port
from workly.ui.rendering import when

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.async_api")

# Once a year (06:30 in Kolkata on 1 January, 01:00 UTC): it never fires by itself during a
# test, so only Trigger now makes a task, and its next runs stay put.
YEARLY = {"cron": "30 6 1 1 *", "timezone": "Asia/Kolkata"}


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


async def create_schedule(client: httpx.AsyncClient, url: str, **fields: Any) -> dict[str, Any]:
    body = {**YEARLY, "queue": "reports", "task": {"url": url}, **fields}
    response = await client.post("/v1/schedules", json=body)
    assert response.status_code == 201, response.text
    schedule: dict[str, Any] = response.json()
    return schedule


async def schedule_state(client: httpx.AsyncClient, schedule_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/schedules/{schedule_id}")
    assert response.status_code == 200, response.text
    schedule: dict[str, Any] = response.json()
    return schedule


def shown_runs(schedule: dict[str, Any]) -> list[str]:
    """Its next runs as the pages show them (UTC)."""
    return [when(run) for run in schedule["next_runs"]]


async def log_in(tab: playwright.Page, base: str, path: str) -> None:
    await tab.goto(f"{base}{path}")
    await tab.get_by_label("API token").fill(TEST_TOKEN)
    await tab.get_by_role("button", name="Log in").click()
    await playwright.expect(tab).to_have_url(f"{base}{path}")


async def test_a_schedule_listed_triggered_paused_resumed_and_deleted_in_the_browser(
    e2e: E2E, page: tuple[playwright.Page, list[str]]
) -> None:
    tab, dialogs = page
    expect = playwright.expect
    base, client, receiver = e2e.server.base_url, e2e.client, e2e.receiver
    schedule = await create_schedule(client, receiver.url("/report"), name="yearly report")
    path = f"/ui/schedules/{schedule['id']}"

    # Log in; the navigation leads to the list, which shows the schedule and its next runs.
    await log_in(tab, base, "/ui")
    await tab.locator("header nav").get_by_role("link", name="Schedules").click()
    await expect(tab).to_have_url(f"{base}/ui/schedules")
    row = tab.locator(f'tr[data-schedule="{schedule["id"]}"]')
    await expect(row.locator('[data-field="name"]')).to_have_text("yearly report")
    await expect(row.locator('[data-field="cron"]')).to_have_text("30 6 1 1 * in Asia/Kolkata")
    await expect(row.locator('[data-field="makes"]')).to_contain_text(f"POST {receiver.url('/report')}")
    await expect(row.locator('[data-field="makes"]').get_by_role("link", name="reports")).to_be_visible()
    await expect(row.locator('[data-field="state"]')).to_have_text("active")
    runs = shown_runs(schedule)
    assert len(runs) == 5 and all(run.endswith("-01-01 01:00:00") for run in runs)
    await expect(row.locator('[data-field="next-runs"] li')).to_have_text(runs)
    await expect(row.locator('[data-field="last-run"]')).to_have_text("never")

    # Its page: Trigger now makes a task, which the page links; the task is delivered.
    await row.get_by_role("link", name=schedule["id"]).click()
    await expect(tab).to_have_url(f"{base}{path}")
    await expect(tab.locator("#next-runs li")).to_have_text(runs)
    await tab.get_by_role("button", name="Trigger now").click()
    await expect(tab.get_by_role("status")).to_contain_text("Triggered: it fired once now")
    triggered = await schedule_state(client, schedule["id"])
    task_id = triggered["last_task_id"]
    assert task_id is not None and triggered["next_runs"] == schedule["next_runs"]
    await expect(tab.locator("#last-run")).to_contain_text(when(triggered["last_run_at"]))
    await tab.locator("#last-run").get_by_role("link", name=task_id).click()
    await expect(tab).to_have_url(f"{base}/ui/tasks/{task_id}")
    await receiver.wait_for("/report", 1)
    await wait_for_status(client, task_id, "succeeded")
    await tab.reload()
    await expect(tab.locator("#status")).to_have_text("succeeded")

    # Pause: paused, with no next runs; Resume brings them back.
    await tab.goto(f"{base}{path}")
    await tab.get_by_role("button", name="Pause").click()
    await expect(tab.get_by_role("status")).to_contain_text("Paused")
    await expect(tab.locator("#state")).to_have_text("paused")
    await expect(tab.locator("#next-runs li")).to_have_count(0)
    await expect(tab.locator("#next-runs")).to_have_text("none: paused")
    assert (await schedule_state(client, schedule["id"]))["next_runs"] == []
    await tab.get_by_role("button", name="Resume").click()
    await expect(tab.get_by_role("status")).to_contain_text("Resumed")
    await expect(tab.locator("#state")).to_have_text("active")
    await expect(tab.locator("#next-runs li")).to_have_text(runs)
    assert (await schedule_state(client, schedule["id"]))["paused"] is False

    # Delete: back on the list, without it; the task it made stays.
    await tab.get_by_role("button", name="Delete").click()
    await expect(tab).to_have_url(f"{base}/ui/schedules?done=deleted")
    await expect(tab.get_by_role("status")).to_contain_text("Deleted")
    await expect(tab.locator(f'tr[data-schedule="{schedule["id"]}"]')).to_have_count(0)
    assert (await client.get(f"/v1/schedules/{schedule['id']}")).status_code == 404
    assert (await client.get(f"/v1/tasks/{task_id}")).status_code == 200
    assert dialogs == []


async def test_a_form_on_another_origin_cannot_press_a_schedules_buttons(
    e2e: E2E, page: tuple[playwright.Page, list[str]]
) -> None:
    """A page on another port of 127.0.0.1 (the same site, so the browser sends the session
    cookie along) posts a form to Pause and to Delete: both refused, nothing changed."""
    tab, _ = page
    base, client = e2e.server.base_url, e2e.client
    schedule = await create_schedule(client, e2e.receiver.url("/report"))
    await log_in(tab, base, f"/ui/schedules/{schedule['id']}")
    other = f"http://127.0.0.1:{free_port()}"  # the browser's route answers for it, no server
    buttons = "".join(
        f'<form method="post" action="{base}/ui/schedules/{schedule["id"]}/{action}">'
        f'<button type="submit">{action}</button></form>'
        for action in ("pause", "delete")
    )
    await tab.route(
        f"{other}/form",
        lambda route: route.fulfill(content_type="text/html", body=f"<!doctype html>{buttons}"),
    )
    for action in ("pause", "delete"):
        await tab.goto(f"{other}/form")
        async with tab.expect_response(f"{base}/ui/schedules/{schedule['id']}/{action}") as answered:
            await tab.get_by_role("button", name=action).click()
        refused = await answered.value
        assert refused.status == 403 and (await refused.request.all_headers())["origin"] == other
        await playwright.expect(tab.locator("body")).to_contain_text("refused")
    after = await schedule_state(client, schedule["id"])
    assert after["paused"] is False and after["next_runs"] == schedule["next_runs"]
