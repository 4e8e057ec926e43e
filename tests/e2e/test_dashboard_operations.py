"""The dashboard's bulk operations in a real headless Chromium (Debian's, driven by Playwright)
against `workly dev`'s app with an API token required: tasks of a queue and an endpoint's
delivery fail for real, "Retry all failed" is pressed on the queue's page and on the
endpoint's page, and the operation's page, reloading itself, follows each to "succeeded" while
the receiver gets the tasks again. Also the task page's "Retry now" and a callback's link to
its task; and, on an app whose operations this test works itself, a running operation's page
following its progress by reloading itself.

The app is served in this process on a real socket (tests/e2e/cli.py), one server for the
module's first two tests: only the first makes operations and endpoints (it counts all of
them), and its queue's failed tasks are its own. The browser may only reach 127.0.0.1: every
other request is aborted before it leaves.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.cli import InProcessServer
from tests.e2e.conftest import E2E, create_endpoint, enqueue, wait_for_status
from tests.storage.helpers import result_for, token
from tests.support.servers import TEST_SECRET, TEST_TOKEN, api_client, running_app
from workly.config import Settings
from workly.storage.sqlite import SqliteStorage

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.async_api")

FAILING = 3  # tasks of the queue that fail, then are retried together
OPERATION_PAGE = re.compile(r".*/ui/operations/op_\w+(\?done=started)?$")


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


async def test_retry_all_failed_from_a_queue_and_an_endpoint_runs_to_succeeded_in_the_browser(
    e2e: E2E, page: tuple[playwright.Page, list[str]]
) -> None:
    tab, dialogs = page
    expect = playwright.expect
    base, client, receiver = e2e.server.base_url, e2e.client, e2e.receiver
    receiver.script("/flaky", [500] * FAILING)  # then 204: the retries succeed
    failed = [
        await enqueue(client, "web", {"url": receiver.url("/flaky"), "max_attempts": 1, "body": {"n": n}})
        for n in range(FAILING)
    ]
    endpoint = await create_endpoint(client, receiver.url("/hook"), max_attempts=1)
    receiver.script("/hook", [503])
    published = await client.post("/v1/events", json={"type": "order.created", "payload": {"n": 1}})
    assert published.status_code == 201, published.text
    [delivery] = [d["task_id"] for d in published.json()["deliveries"]]
    for task in failed:
        await wait_for_status(client, task["id"], "failed")
    await wait_for_status(client, delivery, "failed")

    # Log in; the overview's failed count leads to the queue's failed tasks, and its button.
    await tab.goto(f"{base}/ui")
    await tab.get_by_label("API token").fill(TEST_TOKEN)
    await tab.get_by_role("button", name="Log in").click()
    await expect(tab).to_have_url(f"{base}/ui")
    await tab.locator('tr[data-queue="web"] td[data-status="failed"] a').click()
    await expect(tab.locator("tr[data-task]")).to_have_count(FAILING)
    await expect(tab.locator("#queue-failed")).to_contain_text(f"{FAILING} failed tasks in queue web")
    await tab.get_by_role("button", name="Retry all failed").click()

    # The operation's page (with the notice until its first reload), reloading itself until the
    # runner is done.
    await expect(tab).to_have_url(OPERATION_PAGE)
    await expect(tab.locator("#state")).to_have_text("succeeded", timeout=15_000)
    operation_id = tab.url.removeprefix(f"{base}/ui/operations/").split("?")[0]
    await expect(tab.locator("#matched")).to_have_text(str(FAILING))
    await expect(tab.locator("#changed")).to_have_text(str(FAILING))
    await expect(tab.locator("#skipped")).to_have_text("0")
    await expect(tab.locator("#filter")).to_have_text("queue web, status failed")
    await expect(tab.locator("#finished")).to_contain_text("UTC")
    await expect(tab.locator("progress")).to_have_count(0)
    operation = (await client.get(f"/v1/operations/{operation_id}")).json()
    assert (operation["state"], operation["filter"]) == ("succeeded", {"queue": "web", "status": "failed"})
    await receiver.wait_for("/flaky", 2 * FAILING)  # each delivered again, answered 204 now
    for task in failed:
        await wait_for_status(client, task["id"], "succeeded")

    # The endpoint's page offers the same for its failed delivery.
    await tab.goto(f"{base}/ui/endpoints/{endpoint['id']}")
    await expect(tab.locator("#failed")).to_have_text("1")
    await tab.get_by_role("button", name="Retry all failed").click()
    await expect(tab).to_have_url(OPERATION_PAGE)
    await expect(tab.locator("#state")).to_have_text("succeeded", timeout=15_000)
    await expect(tab.locator("#filter")).to_have_text(f"endpoint {endpoint['id']}, status failed")
    await wait_for_status(client, delivery, "succeeded")
    await tab.goto(f"{base}/ui/endpoints/{endpoint['id']}")
    await expect(tab.locator("#failed")).to_have_text("0")
    await expect(tab.get_by_role("button", name="Retry all failed")).to_have_count(0)

    # The navigation leads to both operations, newest first.
    await tab.locator("header nav").get_by_role("link", name="Operations").click()
    await expect(tab).to_have_url(f"{base}/ui/operations")
    rows = tab.locator("tr[data-operation]")
    await expect(rows).to_have_count(2)
    await expect(rows.nth(1)).to_have_attribute("data-operation", operation_id)
    for index in range(2):
        await expect(rows.nth(index).locator('[data-field="state"]')).to_have_text("succeeded")
    assert dialogs == []


async def test_retry_now_and_a_callbacks_link_to_its_task_in_the_browser(
    e2e: E2E, page: tuple[playwright.Page, list[str]]
) -> None:
    tab, _ = page
    expect = playwright.expect
    base, client, receiver = e2e.server.base_url, e2e.client, e2e.receiver
    later = await enqueue(
        client, "web",
        {"url": receiver.url("/later"), "run_at": "2099-01-01T00:00:00Z", "callback_url": receiver.url("/cb"),
         "stop_on": ["4xx"], "deadline": 600},
    )  # fmt: skip

    await tab.goto(f"{base}/ui/tasks/{later['id']}")
    await tab.get_by_label("API token").fill(TEST_TOKEN)
    await tab.get_by_role("button", name="Log in").click()
    await expect(tab).to_have_url(f"{base}/ui/tasks/{later['id']}")
    await expect(tab.locator("#stop-on")).to_contain_text("4xx")
    await expect(tab.locator("#deadline")).to_have_text("600 s after it was created or last retried")
    await expect(tab.locator("#callback-url")).to_have_text(receiver.url("/cb"))
    await tab.get_by_role("button", name="Retry now").click()
    await expect(tab.get_by_role("status")).to_have_text("Re-enqueued: the task is due now.")
    await receiver.wait_for("/later", 1)
    await wait_for_status(client, later["id"], "succeeded")

    # Its callback is a task of its own, whose page links back to the task it tells of.
    [callback] = await receiver.wait_for("/cb", 1)
    callback_id = callback.headers["webhook-id"]
    await tab.goto(f"{base}/ui/tasks/{callback_id}")
    await tab.locator("#callback-of").get_by_role("link", name=later["id"]).click()
    await expect(tab).to_have_url(f"{base}/ui/tasks/{later['id']}")
    await expect(tab.locator("#status")).to_have_text("succeeded")


async def test_a_running_operations_page_reloads_itself_until_the_operation_ends(
    tmp_path: Path, page: tuple[playwright.Page, list[str]]
) -> None:
    """No dispatcher in the app, so no runner: the test fails the tasks and works the operation
    through a storage of its own on the same database, chunk by chunk, while the browser only
    watches the page."""
    tab, dialogs = page
    expect = playwright.expect
    url = f"sqlite:///{tmp_path / 'workly.db'}"
    settings = Settings(database_url=url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=TEST_TOKEN)
    async with running_app(settings) as base, api_client(base) as client:
        storage = await SqliteStorage.open(url)
        try:
            for n in range(2):
                await enqueue(
                    client, "q", {"url": "http://127.0.0.1:9/hook", "max_attempts": 1, "body": {"n": n}}
                )
            now = datetime.now(UTC)
            claimed = (await storage.dispatch.claim_tasks(10, now, token(), 30.0)).tasks
            await storage.dispatch.record_results([result_for(c, now, "failed", 500) for c in claimed], now)

            await tab.goto(f"{base}/ui/tasks?queue=q")
            await tab.get_by_label("API token").fill(TEST_TOKEN)
            await tab.get_by_role("button", name="Log in").click()
            await tab.get_by_role("button", name="Retry all failed").click()
            await expect(tab.locator("#state")).to_have_text("running")
            await expect(tab.locator("#done")).to_have_text("0 of 2")
            # The first reload drops the button's notice: the page came again by itself.
            await expect(tab.get_by_role("status")).to_have_count(0, timeout=5_000)
            operation_id = tab.url.removeprefix(f"{base}/ui/operations/")
            assert operation_id.startswith("op_") and "?" not in operation_id

            runner = token()
            assert await storage.operations.take_operation(datetime.now(UTC), runner, 15.0) is not None
            assert await storage.operations.run_operation_chunk(
                operation_id, runner, datetime.now(UTC), 15.0, 1
            )
            await expect(tab.locator("#done")).to_have_text("1 of 2", timeout=5_000)
            await expect(tab.locator("progress")).to_have_attribute("value", "1")
            assert await storage.operations.run_operation_chunk(
                operation_id, runner, datetime.now(UTC), 15.0, 10
            )
            await expect(tab.locator("#state")).to_have_text("succeeded", timeout=5_000)
            await expect(tab.locator("#changed")).to_have_text("2")
            await expect(tab.locator("progress")).to_have_count(0)
        finally:
            await storage.close()
    assert dialogs == []
