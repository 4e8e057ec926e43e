"""The dashboard's bulk operations in-process, on both backends: the "Retry all failed" buttons
of a queue and of an endpoint (shown only while there are failed tasks, guarded like every
button), an operation's page with its progress, the list of operations; and the task page's
callbacks, retry policy and "Retry now".

No dispatcher runs here, so nothing fails and no operation runs by itself: the tests fail tasks
and work operations through the service's storage, as the dispatcher and the runner would.

tests/e2e/test_dashboard_operations.py presses the button in a real headless Chromium.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.storage.helpers import new, result_for, token
from tests.support.servers import AUTH
from tests.ui.helpers import (
    CROSS_SITE,
    ESCAPED,
    FOREIGN_ORIGINS,
    HOOK,
    SCRIPT,
    assert_refused_as_foreign,
    log_in,
    origin,
    row,
)
from workly.service import Service
from workly.storage.contract import Storage
from workly.ui import operation_pages

BUTTON = ">Retry all failed</button>"
DASH = "\N{EN DASH}"  # as the pages write a range


@dataclass
class Dashboard:
    service: Service
    http: httpx.AsyncClient  # sends no token by itself; logged in by the fixture
    lease: str = field(default_factory=token)  # the test's operation runner
    taken: set[str] = field(default_factory=set)

    @property
    def storage(self) -> Storage:
        return self.service.storage

    def origin(self) -> dict[str, str]:
        return origin(self.http)

    async def enqueue(self, queue: str = "q", **fields: Any) -> str:
        response = await self.http.post(
            f"/v1/queues/{queue}/tasks", json={"url": HOOK, **fields}, headers=AUTH
        )
        assert response.status_code == 201, response.text
        task_id: str = response.json()["id"]
        return task_id

    async def create_endpoint(self) -> str:
        response = await self.http.post("/v1/endpoints", json={"url": HOOK}, headers=AUTH)
        assert response.status_code == 201, response.text
        endpoint_id: str = response.json()["id"]
        return endpoint_id

    async def publish(self) -> list[str]:
        """An order.created event; the ids of its delivery tasks."""
        body = {"type": "order.created", "payload": {}}
        response = await self.http.post("/v1/events", json=body, headers=AUTH)
        assert response.status_code == 201, response.text
        return [d["task_id"] for d in response.json()["deliveries"]]

    async def fail_every_ready_task(self) -> int:
        """Claim every due task and fail it for good (a 500 on its last attempt), as the
        dispatcher would record it; how many there were."""
        now = self.service.now()
        claimed = (await self.storage.dispatch.claim_tasks(100, now, token(), 30.0)).tasks
        await self.storage.dispatch.record_results([result_for(c, now, "failed", 500) for c in claimed], now)
        return len(claimed)

    async def work(self, operation_id: str, chunk: int) -> None:
        """One chunk of the operation, as the runner works it (the runner only runs with the
        dispatcher on): this test's runner takes it, or goes on under the lease it has."""
        if operation_id not in self.taken:
            taken = await self.storage.operations.take_operation(self.service.now(), self.lease, 15.0)
            assert taken is not None and taken.id == operation_id
            self.taken.add(operation_id)
        now = self.service.now()
        assert (
            await self.storage.operations.run_operation_chunk(operation_id, self.lease, now, 15.0, chunk)
            is not None
        )

    async def operations(self) -> list[dict[str, Any]]:
        response = await self.http.get("/v1/operations", headers=AUTH)
        assert response.status_code == 200, response.text
        listed: list[dict[str, Any]] = response.json()["operations"]
        return listed

    async def status(self, task_id: str) -> str:
        status: str = (await self.http.get(f"/v1/tasks/{task_id}", headers=AUTH)).json()["status"]
        return status


@pytest.fixture
async def ui(app: tuple[Service, httpx.AsyncClient]) -> Dashboard:
    """The app with an API token required and no dispatcher; a browser-like client, logged in."""
    service, client = app
    await log_in(client)
    return Dashboard(service, client)


def text_of(page: str, element_id: str) -> str:
    """The text of the element with this id (tags stripped, spaces collapsed)."""
    found = re.search(rf'<(\w+)[^>]* id="{element_id}"[^>]*>(.*?)</\1>', page, re.S)
    assert found is not None, f"no element #{element_id}"
    return " ".join(re.sub(r"<[^>]+>", "", found.group(2)).split())


def refreshes(page: str) -> bool:
    return 'http-equiv="refresh"' in page


# --- the buttons -------------------------------------------------------------------------------


async def test_retry_all_failed_is_offered_only_where_there_are_failed_tasks(ui: Dashboard) -> None:
    await ui.enqueue()
    await ui.enqueue("other")
    endpoint_id = await ui.create_endpoint()
    await ui.publish()
    # Nothing failed yet: no button anywhere.
    for path in ("/ui/tasks?queue=q", f"/ui/tasks?queue={endpoint_id}", f"/ui/endpoints/{endpoint_id}"):
        page = await ui.http.get(path)
        assert page.status_code == 200 and BUTTON not in page.text, path
    assert text_of((await ui.http.get(f"/ui/endpoints/{endpoint_id}")).text, "failed") == "0"

    assert await ui.fail_every_ready_task() == 3
    queue_page = (await ui.http.get("/ui/tasks?queue=q")).text
    assert BUTTON in queue_page and 'action="/ui/queues/q/retry-failed"' in queue_page
    assert text_of(queue_page, "queue-failed").startswith("1 failed task in queue q.")
    assert 'action="/ui/queues/other/retry-failed"' in (await ui.http.get("/ui/tasks?queue=other")).text
    endpoint_page = (await ui.http.get(f"/ui/endpoints/{endpoint_id}")).text
    assert BUTTON in endpoint_page and f'action="/ui/endpoints/{endpoint_id}/retry-failed"' in endpoint_page
    assert text_of(endpoint_page, "failed") == "1"
    assert f'href="/ui/endpoints/{endpoint_id}?status=failed"' in endpoint_page
    # The unfiltered list is no queue's page: nothing to retry from there.
    assert BUTTON not in (await ui.http.get("/ui/tasks")).text
    assert BUTTON not in (await ui.http.get("/ui/tasks?queue=nope")).text


async def test_retry_all_failed_in_a_queue_starts_an_operation_and_shows_it(ui: Dashboard) -> None:
    failed = [await ui.enqueue(max_attempts=1) for _ in range(3)]
    assert await ui.fail_every_ready_task() == 3
    ready = await ui.enqueue()
    await ui.enqueue("other", max_attempts=1)

    response = await ui.http.post("/ui/queues/q/retry-failed", headers=ui.origin())
    assert response.status_code == 303
    [operation] = await ui.operations()
    assert response.headers["location"] == f"/ui/operations/{operation['id']}?done=started"
    assert (operation["action"], operation["filter"]) == ("retry", {"queue": "q", "status": "failed"})
    assert (operation["state"], operation["matched"]) == ("running", 3)

    page = await ui.http.get(response.headers["location"])
    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    assert "Started: it runs in the background" in page.text
    assert text_of(page.text, "state") == "running" and text_of(page.text, "action").startswith("retry")
    assert text_of(page.text, "filter") == "queue q, status failed"
    assert '<a href="/ui/tasks?queue=q">q</a>' in page.text
    assert (text_of(page.text, "matched"), text_of(page.text, "changed")) == ("3", "0")
    assert '<progress id="progress" max="3" value="0">0%</progress>' in page.text
    assert text_of(page.text, "finished") == "not yet"
    # It reloads itself while it runs, without the notice (shown once), and without a script.
    assert f'<meta http-equiv="refresh" content="1; url=/ui/operations/{operation["id"]}">' in page.text
    assert "<script" not in page.text

    await ui.work(operation["id"], chunk=2)  # part of it: the progress moves
    page = await ui.http.get(f"/ui/operations/{operation['id']}")
    assert "Started:" not in page.text and text_of(page.text, "state") == "running"
    assert '<progress id="progress" max="3" value="2">66%</progress>' in page.text
    assert text_of(page.text, "done") == "2 of 3" and text_of(page.text, "changed") == "2"

    await ui.work(operation["id"], chunk=2)  # the rest
    page = await ui.http.get(f"/ui/operations/{operation['id']}")
    assert text_of(page.text, "state") == "succeeded"
    assert [text_of(page.text, f) for f in ("matched", "changed", "skipped")] == ["3", "3", "0"]
    assert text_of(page.text, "finished").endswith(" UTC")
    assert "<progress" not in page.text and not refreshes(page.text)
    assert [await ui.status(task_id) for task_id in [*failed, ready]] == ["ready"] * 4
    # Nothing failed is left, so the queue's page no longer offers the button.
    assert BUTTON not in (await ui.http.get("/ui/tasks?queue=q")).text


async def test_retry_all_failed_of_an_endpoint_filters_by_the_endpoint(ui: Dashboard) -> None:
    endpoint_id = await ui.create_endpoint()
    [delivery] = await ui.publish()
    await ui.enqueue(max_attempts=1)  # another queue's failed task is not the endpoint's
    assert await ui.fail_every_ready_task() == 2

    response = await ui.http.post(f"/ui/endpoints/{endpoint_id}/retry-failed", headers=ui.origin())
    assert response.status_code == 303
    [operation] = await ui.operations()
    assert response.headers["location"] == f"/ui/operations/{operation['id']}?done=started"
    assert operation["filter"] == {"endpoint_id": endpoint_id, "status": "failed"}
    assert (operation["action"], operation["matched"]) == ("retry", 1)
    page = (await ui.http.get(response.headers["location"])).text
    assert f'<a href="/ui/endpoints/{endpoint_id}">{endpoint_id}</a>' in page
    await ui.work(operation["id"], chunk=100)
    assert await ui.status(delivery) == "ready"
    assert (await ui.operations())[0]["state"] == "succeeded"


async def test_retry_all_failed_of_what_does_not_exist_is_a_404_page(ui: Dashboard) -> None:
    for path in (
        "/ui/queues/nope/retry-failed",
        "/ui/queues/a%00b/retry-failed",
        "/ui/queues/" + "q" * 200 + "/retry-failed",
        "/ui/endpoints/ep_nope/retry-failed",
        "/ui/endpoints/%00/retry-failed",
        "/ui/endpoints/" + "x" * 500 + "/retry-failed",
    ):
        response = await ui.http.post(path, headers=ui.origin())
        assert response.status_code == 404 and response.headers["content-type"].startswith("text/html"), path
        assert "x" * 100 not in response.text
    assert await ui.operations() == []


@pytest.mark.parametrize("headers", [*FOREIGN_ORIGINS, CROSS_SITE])
async def test_the_buttons_refuse_posts_from_other_origins_and_start_nothing(
    ui: Dashboard, headers: dict[str, str]
) -> None:
    await ui.enqueue(max_attempts=1)
    endpoint_id = await ui.create_endpoint()
    await ui.publish()
    assert await ui.fail_every_ready_task() == 2
    for path in ("/ui/queues/q/retry-failed", f"/ui/endpoints/{endpoint_id}/retry-failed"):
        assert_refused_as_foreign(await ui.http.post(path, headers=headers), headers, path)
    assert await ui.operations() == []


async def test_without_a_session_the_pages_go_to_login_and_the_buttons_are_refused(ui: Dashboard) -> None:
    await ui.enqueue(max_attempts=1)
    await ui.fail_every_ready_task()
    await ui.http.post("/ui/logout", headers=ui.origin())
    for path, quoted in [
        ("/ui/operations", "%2Fui%2Foperations"), ("/ui/operations/op_x", "%2Fui%2Foperations%2Fop_x"),
    ]:  # fmt: skip
        response = await ui.http.get(path)
        assert (response.status_code, response.headers["location"]) == (303, f"/ui/login?next={quoted}")
    assert (await ui.http.post("/ui/queues/q/retry-failed", headers=ui.origin())).status_code == 401
    assert await ui.operations() == []


# --- the operation pages -----------------------------------------------------------------------


async def test_the_operations_list_is_newest_first_in_the_navigation_and_pages_on(
    ui: Dashboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = await ui.http.get("/ui/operations")
    assert empty.status_code == 200 and "No bulk operations yet" in empty.text
    assert '<a href="/ui/operations">Operations</a>' in empty.text and not refreshes(empty.text)
    await ui.enqueue(max_attempts=1)
    await ui.fail_every_ready_task()
    ids = []
    for _ in range(3):
        response = await ui.http.post("/ui/queues/q/retry-failed", headers=ui.origin())
        ids.append(response.headers["location"].split("/")[-1].split("?")[0])
    await ui.work(ids[0], chunk=100)  # the oldest: succeeded, it retried the one failed task

    listing = (await ui.http.get("/ui/operations")).text
    assert [m for m in re.findall(r'<tr data-operation="([^"]+)"', listing)] == ids[::-1]
    oldest = row(listing, "data-operation", ids[0])
    assert f'<a href="/ui/operations/{ids[0]}">{ids[0]}</a>' in oldest
    assert '<span class="op-state op-succeeded">succeeded</span>' in oldest
    assert re.search(r'data-field="changed">1<', oldest)
    newest = row(listing, "data-operation", ids[2])
    assert '<span class="op-state op-running">running</span>' in newest
    assert '<a href="/ui/tasks?queue=q">q</a>' in newest and "<code>failed</code>" in newest
    assert refreshes(listing)  # while one runs

    monkeypatch.setattr(operation_pages, "PAGE_SIZE", 2)
    first = (await ui.http.get("/ui/operations")).text
    older = re.search(r'<a href="([^"]+)" rel="next">', first)
    assert older is not None and ids[0] not in first
    second = (await ui.http.get(older.group(1).replace("&amp;", "&"))).text
    assert ids[0] in second and ids[2] not in second and 'rel="next"' not in second
    assert (await ui.http.get("/ui/operations", params={"cursor": "garbage!"})).status_code == 400


async def test_an_unknown_operation_is_a_404_page(ui: Dashboard) -> None:
    for path in ("/ui/operations/op_nope", "/ui/operations/%00", "/ui/operations/" + "x" * 5000):
        missing = await ui.http.get(path)
        assert missing.status_code == 404 and "There is no such operation" in missing.text, path
        assert missing.headers["content-type"].startswith("text/html") and "x" * 100 not in missing.text


async def test_an_operation_of_nothing_and_one_from_the_api_show_what_they_are(ui: Dashboard) -> None:
    body = {
        "action": "cancel",
        "filter": {"tenant": SCRIPT, "created_after": "2030-01-02T03:04:05Z", "last_status_code": 503},
    }
    created = await ui.http.post("/v1/operations", json=body, headers=AUTH)
    assert created.status_code == 202, created.text
    page = (await ui.http.get(f"/ui/operations/{created.json()['id']}")).text
    assert "<script" not in page and ESCAPED in page
    assert text_of(page, "filter") == (
        f"tenant {ESCAPED}, created at or after 2030-01-02 03:04:05 UTC, last status code 503"
    )
    assert text_of(page, "action").startswith("cancel (changes ready tasks")
    assert '<progress id="progress"></progress>' in page  # it matched nothing: no share to show
    assert text_of(page, "done") == "0 of 0"
    listing = (await ui.http.get("/ui/operations")).text
    assert "<script" not in listing and ESCAPED in listing


# --- the task page -------------------------------------------------------------------------------


async def test_the_task_page_shows_callbacks_and_the_retry_policy(ui: Dashboard) -> None:
    task_id = await ui.enqueue(
        stop_on=["4xx", "503"], deadline=90, min_backoff=0.5, max_backoff=8,
        callback_url=f"{HOOK}/done?x=<b>", failure_callback_url=f"{HOOK}/failed",
    )  # fmt: skip
    page = (await ui.http.get(f"/ui/tasks/{task_id}")).text
    assert text_of(page, "callback-url") == f"{HOOK}/done?x=&lt;b&gt;" and "<b>" not in page
    assert text_of(page, "failure-callback-url") == f"{HOOK}/failed"
    assert text_of(page, "backoff") == f"0.5{DASH}8 s"
    assert text_of(page, "stop-on").startswith("4xx 503 (fails at once")
    assert text_of(page, "deadline") == "90 s after it was created or last retried"
    assert 'id="callback-of"' not in page

    plain = (await ui.http.get(f"/ui/tasks/{await ui.enqueue(stop_on=[])}")).text
    assert text_of(plain, "stop-on") == "nothing: every failed answer is retried"
    assert text_of(plain, "deadline") == "none" and text_of(plain, "backoff") == f"1{DASH}3600 s"
    assert 'id="callback-url"' not in plain

    # A callback task (the sender makes them; stored here directly) links to its task.
    [stored] = await ui.storage.tasks.enqueue(
        [new(queue="workly.callbacks", callback_of=task_id)], ui.service.now()
    )
    callback = (await ui.http.get(f"/ui/tasks/{stored.task.id}")).text
    assert f'id="callback-of"><a href="/ui/tasks/{task_id}">{task_id}</a>' in callback


async def test_a_ready_task_offers_retry_now_and_a_failed_one_retry(ui: Dashboard) -> None:
    task_id = await ui.enqueue(max_attempts=1, run_at="2099-01-01T00:00:00Z")
    page = (await ui.http.get(f"/ui/tasks/{task_id}")).text
    assert ">Retry now</button>" in page and ">Cancel</button>" in page
    retried = await ui.http.post(f"/ui/tasks/{task_id}/retry", headers=ui.origin())
    assert (retried.status_code, retried.headers["location"]) == (303, f"/ui/tasks/{task_id}?done=retried")
    task = (await ui.http.get(f"/v1/tasks/{task_id}", headers=AUTH)).json()
    assert task["status"] == "ready" and not task["run_at"].startswith("2099")  # due now

    assert await ui.fail_every_ready_task() == 1
    page = (await ui.http.get(f"/ui/tasks/{task_id}")).text
    assert ">Retry</button>" in page and "Retry now" not in page and ">Cancel</button>" not in page
    assert text_of(page, "attempts").startswith("1 made; at most 1")
