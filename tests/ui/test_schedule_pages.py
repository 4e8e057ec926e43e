"""The dashboard's schedule pages in-process, on both backends: what the list and a schedule's
page show (cron and time zone, what it makes, paused or not, the next runs in UTC, the last
firing with a link to what it made), the Pause, Resume, Trigger now and Delete buttons and the
guards in front of them, escaping, and what they refuse.

No dispatcher runs here, so schedules fire only when triggered.
tests/e2e/test_dashboard_schedules.py drives the same pages in a real headless Chromium.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

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
from workly.ui import schedule_pages
from workly.ui.rendering import when

HOURLY = {"cron": "15 * * * *", "queue": "reports", "task": {"url": HOOK, "method": "PUT"}}


async def create_schedule(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await http.post("/v1/schedules", json=body or HOURLY, headers=AUTH)
    assert response.status_code == 201, response.text
    schedule: dict[str, Any] = response.json()
    return schedule


async def api_schedule(http: httpx.AsyncClient, schedule_id: str) -> dict[str, Any]:
    response = await http.get(f"/v1/schedules/{schedule_id}", headers=AUTH)
    assert response.status_code == 200, response.text
    schedule: dict[str, Any] = response.json()
    return schedule


def text(html: str) -> str:
    """``html`` as text: tags stripped, spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def part(html: str, marker: str) -> str:
    """The text of the cell, field or name whose tag holds ``marker`` (an id or a data-field)."""
    found = re.search(rf"<(td|dd|div)[^>]* {marker}[^>]*>(.*?)</\1>", html, re.S)
    assert found is not None, f"no element with {marker}"
    return text(found.group(2))


def shown_runs(schedule: dict[str, Any]) -> str:
    """The next runs as the pages show them: UTC, one after the other."""
    return " ".join(when(run) for run in schedule["next_runs"])


async def test_without_a_session_the_pages_go_to_login_and_the_buttons_are_refused(
    http: httpx.AsyncClient,
) -> None:
    schedule = await create_schedule(http)
    path = f"/ui/schedules/{schedule['id']}"
    for page, quoted in [
        ("/ui/schedules", "%2Fui%2Fschedules"),
        (path, f"%2Fui%2Fschedules%2F{schedule['id']}"),
    ]:
        response = await http.get(page)
        assert (response.status_code, response.headers["location"]) == (303, f"/ui/login?next={quoted}")
    for action in ("pause", "trigger", "delete"):
        assert (await http.post(f"{path}/{action}", headers=origin(http))).status_code == 401
    after = await api_schedule(http, schedule["id"])
    assert (after["paused"], after["last_task_id"]) == (False, None)


async def test_the_list_shows_each_schedule_with_what_it_makes_and_its_next_runs(
    http: httpx.AsyncClient,
) -> None:
    await log_in(http)
    empty = (await http.get("/ui/schedules")).text
    assert "No schedules yet." in empty and '<a href="/ui/schedules">Schedules</a>' in empty  # the nav
    task = await create_schedule(http, name="hourly report", **HOURLY)
    event = await create_schedule(
        http, cron="0 9 * * 1", timezone="Europe/Amsterdam", event={"type": "digest.weekly", "payload": {}}
    )
    paused = await create_schedule(http, paused=True, **HOURLY)
    page = await http.get("/ui/schedules")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.text.index(paused["id"]) < page.text.index(event["id"]) < page.text.index(task["id"])

    shown = row(page.text, "data-schedule", task["id"])
    assert f'<a href="/ui/schedules/{task["id"]}">{task["id"]}</a>' in shown
    assert part(shown, 'data-field="name"') == "hourly report"
    assert part(shown, 'data-field="cron"') == "15 * * * * in UTC"
    assert part(shown, 'data-field="makes"') == f"a task in reports : PUT {HOOK}"
    assert '<a href="/ui/tasks?queue=reports">reports</a>' in shown
    assert part(shown, 'data-field="state"') == "active"
    assert len(task["next_runs"]) == 5 and part(shown, 'data-field="next-runs"') == shown_runs(task)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:15:00", when(run)) for run in task["next_runs"])
    assert part(shown, 'data-field="last-run"') == "never"

    shown = row(page.text, "data-schedule", event["id"])
    assert part(shown, 'data-field="cron"') == "0 9 * * 1 in Europe/Amsterdam"
    assert part(shown, 'data-field="makes"') == "an event digest.weekly"
    assert part(shown, 'data-field="next-runs"') == shown_runs(event)
    shown = row(page.text, "data-schedule", paused["id"])
    assert part(shown, 'data-field="state"') == "paused"
    assert part(shown, 'data-field="next-runs"') == "none: paused"


async def test_pause_resume_trigger_and_delete_from_the_schedules_page(http: httpx.AsyncClient) -> None:
    schedule = await create_schedule(http, name="nightly", **HOURLY)
    path = f"/ui/schedules/{schedule['id']}"
    await log_in(http)
    page = (await http.get(path)).text
    assert part(page, 'id="name"') == "nightly" and part(page, 'id="state"') == "active"
    assert part(page, 'id="next-runs"') == shown_runs(schedule) and part(page, 'id="last-run"') == "never"
    assert f'action="{path}/pause"' in page and f'action="{path}/resume"' not in page

    paused = await http.post(f"{path}/pause", headers=origin(http))
    assert (paused.status_code, paused.headers["location"]) == (303, f"{path}?done=paused")
    page = (await http.get(paused.headers["location"])).text
    assert "Paused: it does not fire until you resume it" in page
    assert part(page, 'id="state"') == "paused" and part(page, 'id="next-runs"') == "none: paused"
    assert f'action="{path}/resume"' in page and (await api_schedule(http, schedule["id"]))["paused"]

    resumed = await http.post(f"{path}/resume", headers=origin(http))
    assert resumed.headers["location"] == f"{path}?done=resumed"
    page = (await http.get(path)).text
    assert part(page, 'id="state"') == "active"
    assert part(page, 'id="next-runs"') == shown_runs(await api_schedule(http, schedule["id"]))

    triggered = await http.post(f"{path}/trigger", headers=origin(http))
    assert triggered.headers["location"] == f"{path}?done=triggered"
    after = await api_schedule(http, schedule["id"])
    page = (await http.get(triggered.headers["location"])).text
    assert "Triggered: it fired once now" in page
    task_id = after["last_task_id"]
    assert f'<a href="/ui/tasks/{task_id}">{task_id}</a>' in page
    assert part(page, 'id="last-run"') == f"{when(after['last_run_at'])}: task {task_id}"
    shown = row((await http.get("/ui/schedules")).text, "data-schedule", schedule["id"])
    assert part(shown, 'data-field="last-run"') == f"{when(after['last_run_at'])}: task {task_id}"

    deleted = await http.post(f"{path}/delete", headers=origin(http))
    assert (deleted.status_code, deleted.headers["location"]) == (303, "/ui/schedules?done=deleted")
    listing = (await http.get(deleted.headers["location"])).text
    assert "Deleted. The tasks and events it made stay." in listing and schedule["id"] not in listing
    assert (await http.get(f"/v1/tasks/{task_id}", headers=AUTH)).status_code == 200
    # Pressed again: the schedule is gone, which the 404 page says.
    again = await http.post(f"{path}/delete", headers=origin(http))
    assert again.status_code == 404 and "There is no such schedule" in again.text


async def test_triggering_an_event_schedule_links_the_event_it_published(http: httpx.AsyncClient) -> None:
    schedule = await create_schedule(http, cron="0 0 1 1 *", event={"type": "year.started", "payload": {}})
    path = f"/ui/schedules/{schedule['id']}"
    await log_in(http)
    assert (await http.post(f"{path}/trigger", headers=origin(http))).status_code == 303
    event_id = (await api_schedule(http, schedule["id"]))["last_event_id"]
    page = (await http.get(path)).text
    assert f'<a href="/ui/events/{event_id}">{event_id}</a>' in page
    assert part(page, 'id="makes"') == "an event year.started"


@pytest.mark.parametrize("headers", [*FOREIGN_ORIGINS, CROSS_SITE])
async def test_the_buttons_refuse_posts_from_other_origins_and_change_nothing(
    http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    schedule = await create_schedule(http)
    await log_in(http)
    for action in ("pause", "trigger", "delete"):
        response = await http.post(f"/ui/schedules/{schedule['id']}/{action}", headers=headers)
        assert_refused_as_foreign(response, headers, action)
    after = await api_schedule(http, schedule["id"])
    assert (after["paused"], after["last_task_id"]) == (False, None)


async def test_pages_escape_what_api_clients_wrote(http: httpx.AsyncClient) -> None:
    schedule = await create_schedule(http, name=SCRIPT, cron="* * * * *", task={"url": f"{HOOK}?q=<b>x</b>"})
    await log_in(http)
    for path in ("/ui/schedules", f"/ui/schedules/{schedule['id']}"):
        page = (await http.get(path)).text
        assert "<script" not in page and "<b>x" not in page, path
        assert ESCAPED in page and "?q=&lt;b&gt;x&lt;/b&gt;" in page, path


async def test_unknown_ids_and_bad_links_answer_pages_not_crashes(http: httpx.AsyncClient) -> None:
    await log_in(http)
    for path in ("/ui/schedules/sch_nope", "/ui/schedules/%00", "/ui/schedules/" + "x" * 5000):
        missing = await http.get(path)
        assert missing.status_code == 404 and "There is no such schedule" in missing.text, path
        assert "x" * 100 not in missing.text
    for path in (
        "/ui/schedules/sch_nope/pause",
        "/ui/schedules/%00/trigger",
        "/ui/schedules/" + "x" * 500 + "/delete",
    ):
        response = await http.post(path, headers=origin(http))
        assert response.status_code == 404 and response.headers["content-type"].startswith("text/html"), path
    broken = await http.get("/ui/schedules", params={"cursor": "garbage!"})
    assert broken.status_code == 400 and "That did not work" in broken.text


async def test_the_list_pages_older_schedules(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schedule_pages, "PAGE_SIZE", 2)
    schedules = [await create_schedule(http) for _ in range(3)]
    await log_in(http)
    first = (await http.get("/ui/schedules")).text
    assert [s["id"] in first for s in schedules] == [False, True, True]  # newest first
    older = re.search(r'<a href="([^"]+)" rel="next">Older schedules', first)
    assert older is not None
    second = (await http.get(older.group(1).replace("&amp;", "&"))).text
    assert schedules[0]["id"] in second and 'rel="next"' not in second
