"""The schedule commands, run in-process (tests/e2e/cli.py) against `workly dev`'s app with API
tokens required, one server for the module, which every test finds without schedules, as a
server of its own would be (``e2e``); bad input is run with no server at all. One test
runs the real `python -m workly`. Every URL is the local receiver's, on 127.0.0.1.

The crons match once a year (1 January), so the scheduler itself never fires while a test runs:
what a schedule makes here comes from `workly schedule-trigger`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli import InProcessServer, offline, real_workly, workly
from tests.e2e.conftest import E2E, wait_for_status
from tests.e2e.test_cli_webhooks import ok, rows

pytestmark = pytest.mark.e2e

NEW_YEAR_AMSTERDAM = "0 9 1 1 *"  # 09:00 in Amsterdam on 1 January is 08:00 UTC (winter time)
NEW_YEAR = "0 0 1 1 *"  # midnight UTC on 1 January
IN_AMSTERDAM = "(09:00 Europe/Amsterdam)"  # how the tables show NEW_YEAR_AMSTERDAM's local time


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


@pytest.fixture
async def e2e(e2e: E2E) -> E2E:
    """conftest's ``e2e`` on the module's server, with no schedule on it: the tests list every
    schedule, so each starts with none (those of the tests before it deleted, through the API)."""
    while found := (await e2e.client.get("/v1/schedules", params={"limit": 100})).json()["schedules"]:
        for schedule in found:
            assert (await e2e.client.delete(f"/v1/schedules/{schedule['id']}")).is_success
    return e2e


def new_years(hour: int, count: int = 5) -> list[datetime]:
    """The next ``count`` times ``hour``:00 UTC on 1 January, after now."""
    now = datetime.now(UTC)
    first_year = now.year if now < datetime(now.year, 1, 1, hour, tzinfo=UTC) else now.year + 1
    return [datetime(year, 1, 1, hour, tzinfo=UTC) for year in range(first_year, first_year + count)]


def parsed(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def shown(when: datetime) -> str:
    """A time as the tables print it: 2031-01-01 08:00:00Z."""
    return when.strftime("%Y-%m-%d %H:%M:%SZ")


async def create(e2e: E2E, *args: str) -> dict[str, Any]:
    """`workly schedule-create <args> --json`: the schedule as the API answered."""
    created: dict[str, Any] = ok(await workly(e2e, "schedule-create", *args, "--json")).json()
    return created


async def detail_fields(e2e: E2E, schedule_id: str) -> dict[str, str]:
    """`workly schedule ID`'s key/value block (above its NEXT RUNS table) as a dict."""
    out = ok(await workly(e2e, "schedule", schedule_id)).out
    found = {}
    for line in out.split("\n\n")[0].splitlines():
        name, value = re.split(r"\s{2,}", line, maxsplit=1)
        found[name] = value
    return found


async def test_create_list_show_and_trigger_a_task_schedule(e2e: E2E, tmp_path: Path) -> None:
    body = tmp_path / "report.json"
    body.write_text('{"report": "daily"}')
    url = e2e.receiver.url("/digest")
    options = ["--tz", "Europe/Amsterdam", "--queue", "reports", "--data", f"@{body}", "--name", "digest"]
    digest = await create(e2e, NEW_YEAR_AMSTERDAM, url, *options, "--header", "X-Source: cli")
    runs = new_years(8)
    assert digest["id"].startswith("sch_")
    assert (digest["name"], digest["cron"], digest["timezone"], digest["queue"]) == (
        "digest", NEW_YEAR_AMSTERDAM, "Europe/Amsterdam", "reports",
    )  # fmt: skip
    task = digest["task"]
    assert (task["url"], task["method"], task["headers"], task["body"]) == (
        url, "POST", {"X-Source": "cli", "content-type": "application/json"}, {"report": "daily"},
    )  # fmt: skip
    assert (digest["event"], digest["paused"], digest["catch_up"]) == (None, False, "latest")
    assert [parsed(run) for run in digest["next_runs"]] == runs and parsed(digest["next_run_at"]) == runs[0]
    assert (digest["last_run_at"], digest["last_task_id"], digest["last_event_id"]) == (None, None, None)

    text = ok(await workly(e2e, "schedule-create", NEW_YEAR, url, "--method", "put", "--catch-up", "none"))
    plain_id = text.out.split()[0]
    assert text.out.strip() == (
        f"{plain_id} created: PUT {url} in queue default, cron '{NEW_YEAR}' (UTC), "
        f"next run {shown(new_years(0)[0])}"
    )

    # Newest first; a cron's five fields stand in the table as they were given.
    listed = rows(await workly(e2e, "schedules"))
    assert listed == [
        [plain_id, "-", *NEW_YEAR.split(), "UTC", "active", *shown(new_years(0)[0]).split(), "-", "-"],
        [digest["id"], "digest", *NEW_YEAR_AMSTERDAM.split(), "Europe/Amsterdam", "active",
         *shown(runs[0]).split(), "-", "-"],
    ]  # fmt: skip
    header = ok(await workly(e2e, "schedules")).out.splitlines()[0]
    assert header.split() == [
        "ID",
        "NAME",
        "CRON",
        "TIMEZONE",
        "STATE",
        "NEXT",
        "RUN",
        "LAST",
        "RUN",
        "LAST",
        "MADE",
    ]
    page = ok(await workly(e2e, "schedules", "--limit", "1", "--json")).json()
    assert [s["id"] for s in page["schedules"]] == [plain_id] and page["next_cursor"]
    rest = ok(
        await workly(e2e, "schedules", "--limit", "1", "--cursor", page["next_cursor"], "--json")
    ).json()
    assert [s["id"] for s in rest["schedules"]] == [digest["id"]] and rest["next_cursor"] is None
    assert (
        ok(await workly(e2e, "schedules", "--limit", "1")).out.splitlines()[-1].startswith("more: --cursor ")
    )

    # One schedule: what it makes, and its next 5 runs.
    detail = ok(await workly(e2e, "schedule", digest["id"])).out
    for line in [
        "cron       0 9 1 1 *", "timezone   Europe/Amsterdam", "state      active", "catch up   latest",
        f"request    POST {url}", "queue      reports",
        "headers    X-Source: cli; content-type: application/json", 'body       {"report":"daily"}',
        f"next run   {shown(runs[0])} {IN_AMSTERDAM}", "last task  -", "priority   0",
    ]:  # fmt: skip
        assert line in detail.splitlines(), (line, detail)
    # The UTC time and the wall-clock time in the schedule's zone; settings it was not given are left out.
    assert detail.split("NEXT RUNS\n")[1].splitlines() == [f"{shown(run)} {IN_AMSTERDAM}" for run in runs]
    for unset in ("key", "tenant", "max attempts", "timeout", "stops on", "deadline", "callback"):
        assert not any(line.startswith(f"{unset} ") for line in detail.splitlines()), (unset, detail)

    # Triggered: the task it made is delivered like any other; the next run does not move.
    fired = ok(await workly(e2e, "schedule-trigger", digest["id"])).out.strip()
    task_id = fired.rsplit(" ", 1)[1]
    assert task_id.startswith("task_") and fired == f"{digest['id']} triggered: made task {task_id}"
    made = ok(await workly(e2e, "task", task_id, "--json")).json()["task"]
    assert (made["queue"], made["method"], made["url"]) == ("reports", "POST", url)
    [received] = await e2e.receiver.wait_for("/digest", 1)
    assert json.loads(received.body) == {"report": "daily"} and received.headers["X-Source"] == "cli"
    await wait_for_status(e2e.client, task_id, "succeeded")
    after = ok(await workly(e2e, "schedule", digest["id"], "--json")).json()
    assert after["last_task_id"] == task_id and after["last_run_at"] is not None
    assert after["next_run_at"] == digest["next_run_at"]
    assert rows(await workly(e2e, "schedules"))[1][-3:-1] == shown(parsed(after["last_run_at"])).split()
    assert rows(await workly(e2e, "schedules"))[1][-1] == task_id


async def test_an_event_schedule_publishes_its_event_when_triggered(e2e: E2E) -> None:
    created = ok(
        await workly(e2e, "schedule-create", NEW_YEAR, "--event", "report.ready", "--data", '{"n": 1}')
    )
    schedule_id = created.out.split()[0]
    assert created.out.strip() == (
        f"{schedule_id} created: event report.ready, cron '{NEW_YEAR}' (UTC), "
        f"next run {shown(new_years(0)[0])}"
    )
    detail = ok(await workly(e2e, "schedule", schedule_id)).out.splitlines()
    assert "event       report.ready" in detail and 'payload     {"n":1}' in detail
    assert not any(line.startswith(("tenant ", "key ")) for line in detail), detail

    fired = ok(await workly(e2e, "schedule-trigger", schedule_id, "--json")).json()
    assert fired["last_task_id"] is None and fired["last_event_id"].startswith("evt_")
    event = ok(await workly(e2e, "event", fired["last_event_id"], "--json")).json()
    assert (event["type"], event["payload"]) == ("report.ready", {"n": 1})
    text = ok(await workly(e2e, "schedule-trigger", schedule_id)).out.strip()
    assert text.startswith(f"{schedule_id} triggered: made event evt_")


async def test_pause_resume_and_delete_a_schedule(e2e: E2E) -> None:
    schedule = await create(e2e, NEW_YEAR, e2e.receiver.url("/tick"))
    schedule_id = schedule["id"]

    paused = ok(await workly(e2e, "schedule-pause", schedule_id))
    assert paused.out.strip() == f"{schedule_id} paused, next run none (paused)"
    found = ok(await workly(e2e, "schedule", schedule_id, "--json")).json()
    assert (found["paused"], found["next_run_at"], found["next_runs"]) == (True, None, [])
    detail = ok(await workly(e2e, "schedule", schedule_id)).out
    assert "state      paused" in detail and detail.strip().endswith("no next runs: paused")
    assert rows(await workly(e2e, "schedules"))[0][8:10] == ["paused", "-"]

    resumed = ok(await workly(e2e, "schedule-resume", schedule_id, "--json")).json()
    assert (resumed["paused"], resumed["next_run_at"]) == (False, schedule["next_run_at"])
    again = ok(await workly(e2e, "schedule-resume", schedule_id)).out.strip()
    assert again == f"{schedule_id} resumed, next run {shown(parsed(schedule['next_run_at']))}"

    assert ok(await workly(e2e, "schedule-delete", schedule_id)).out.strip() == f"{schedule_id} deleted"
    gone = await workly(e2e, "schedule", schedule_id)
    assert (gone.code, gone.err) == (1, f"workly: 404 Not Found: schedule '{schedule_id}' does not exist\n")
    twice = await workly(e2e, "schedule-delete", schedule_id, "--json")
    assert twice.code == 1 and twice.err.startswith("workly: 404 Not Found: ") and twice.out == ""
    assert ok(await workly(e2e, "schedules")).out.strip() == "no schedules"

    held = await create(e2e, NEW_YEAR, e2e.receiver.url("/tick"), "--paused")
    assert (held["paused"], held["next_run_at"]) == (True, None)
    deleted = ok(await workly(e2e, "schedule-delete", held["id"], "--json")).json()
    assert deleted == {"id": held["id"], "deleted": True}


def test_bad_input_exits_2_before_anything_is_sent() -> None:
    url = "http://127.0.0.1:9/bad"
    event_with_task_options = [
        "schedule-create", NEW_YEAR, "--event", "a.b", "--data", "1", "--tenant", "t", "--key", "k",
        "--priority", "0", "--max-attempts", "2", "--stop-on", "404", "--deadline", "1m",
    ]  # fmt: skip
    for args, says in [
        (["schedule-create", NEW_YEAR], "give the URL each firing enqueues a task to, or --event TYPE"),
        (
            ["schedule-create", NEW_YEAR, url, "--event", "a.b"],
            "--event makes an event schedule, which takes no URL",
        ),
        (
            ["schedule-create", NEW_YEAR, "--event", "a.b", "--queue", "q", "--header", "X: 1"],
            "which takes no --queue, --header",
        ),
        (event_with_task_options, "which takes no --priority, --max-attempts, --stop-on, --deadline\n"),
        (["schedule-create", NEW_YEAR, "--event", "a.b"], "--event needs --data: the event's payload"),
        (["schedule-create", NEW_YEAR, url, "--deadline", "soon"], "'soon' is not a duration"),
        (["schedule-create", NEW_YEAR, url, "--catch-up", "all"], "--catch-up 'all': give latest"),
        (["schedule-create", NEW_YEAR, url, "--data", "{not json"], "the --data value is not JSON"),
        (["schedule-create", NEW_YEAR, url, "--header", "nocolon"], "is not a header"),
        (["schedule", "sch/x"], "'sch/x' is not a schedule id (sch_…)"),
        (["schedule-trigger", ""], "'' is not a schedule id"),
        (["schedule-update", "sch_x"], "nothing to change: give --cron, --tz, --name, --no-name, --catch-up"),
        (["schedule-update", "sch_x", "--name", "a", "--no-name"], "give --name NAME or --no-name, not both"),
        (["schedule-update", "sch_x", "--catch-up", "all"], "--catch-up 'all': give latest"),
        (["schedule-update", "sch/x", "--name", "a"], "'sch/x' is not a schedule id (sch_…)"),
        (["schedules", "--server", "http://[::1"], "is not a URL"),
    ]:
        run, sent = offline(*args)
        assert (run.code, run.out, sent) == (2, "", []), run  # nothing sent: no schedule made
        assert says in run.err and "Traceback" not in run.err and len(run.err.splitlines()) == 1, run
    for args in (["schedule-create"], ["schedules", "--limit", "0"]):  # typer's own usage errors
        run, sent = offline(*args)
        assert (run.code, run.out, sent) == (2, "", []), run


async def test_what_the_server_refuses_exits_1_with_its_reason(e2e: E2E) -> None:
    url = e2e.receiver.url("/refused")
    for args, says in [
        (["61 * * * *", url], "cron '61 * * * *': "),
        (["* * * *", url], "cron needs five fields (minute hour day-of-month month day-of-week), got 4"),
        ([NEW_YEAR, url, "--tz", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
        ([NEW_YEAR, "ftp://127.0.0.1/x"], "task.url"),
        ([NEW_YEAR, "--event", "no spaces allowed", "--data", "1"], "event type 'no spaces allowed' must be"),
    ]:
        run = await workly(e2e, "schedule-create", *args)
        assert run.code == 1 and run.out == "", run
        assert run.err.startswith("workly: 422 Unprocessable ") and says in run.err, run
    for command in ("schedule", "schedule-pause", "schedule-resume", "schedule-trigger", "schedule-delete"):
        run = await workly(e2e, command, "sch_nope")
        assert (run.code, run.err) == (1, "workly: 404 Not Found: schedule 'sch_nope' does not exist\n"), run
    run = await workly(e2e, "schedule-update", "sch_nope", "--name", "x")
    assert (run.code, run.err) == (1, "workly: 404 Not Found: schedule 'sch_nope' does not exist\n"), run
    wrong = await workly(e2e, "schedules", env={"WORKLY_TOKEN": "wrong"})
    assert wrong.code == 1 and wrong.err.startswith("workly: 401 Unauthorized: ")
    assert ok(await workly(e2e, "schedules", "--json")).json() == {"schedules": [], "next_cursor": None}


async def test_update_changes_only_what_is_given(e2e: E2E) -> None:
    schedule = await create(e2e, NEW_YEAR, e2e.receiver.url("/tick"), "--name", "first", "--queue", "ticks")
    schedule_id = schedule["id"]

    # A new cron moves the next run; the name changes; the rest stays.
    at_six = new_years(6)
    moved = ok(await workly(e2e, "schedule-update", schedule_id, "--cron", "0 6 1 1 *", "--name", "second"))
    assert moved.out.strip() == f"{schedule_id} updated, next run {shown(at_six[0])}"
    found = ok(await workly(e2e, "schedule", schedule_id, "--json")).json()
    assert (found["cron"], found["name"], found["timezone"], found["queue"], found["catch_up"]) == (
        "0 6 1 1 *", "second", "UTC", "ticks", "latest",
    )  # fmt: skip
    assert [parsed(run) for run in found["next_runs"]] == at_six and found["task"] == schedule["task"]

    # In a zone where the next run falls on another day, the local date is shown too.
    args = ["--cron", "0 19 31 12 *", "--tz", "America/New_York"]
    evening = ok(await workly(e2e, "schedule-update", schedule_id, *args)).out.strip()
    midnight = new_years(0)[0]  # 19:00 on 31 December in New York (EST, UTC-5) is midnight UTC
    local = f"({(midnight - timedelta(days=1)).date()} 19:00 America/New_York)"
    assert evening == f"{schedule_id} updated, next run {shown(midnight)} {local}"
    assert (await detail_fields(e2e, schedule_id))["next run"] == f"{shown(midnight)} {local}"

    # --no-name removes the name; --catch-up and --queue change those alone (the next run stays).
    args = ["--no-name", "--catch-up", "none", "--queue", "later", "--json"]
    changed = ok(await workly(e2e, "schedule-update", schedule_id, *args)).json()
    assert (changed["name"], changed["catch_up"], changed["queue"]) == (None, "none", "later")
    assert (changed["cron"], changed["timezone"]) == ("0 19 31 12 *", "America/New_York")
    assert parsed(changed["next_run_at"]) == midnight
    detail = await detail_fields(e2e, schedule_id)
    assert (detail["name"], detail["catch up"], detail["queue"]) == ("-", "none", "later")

    # Nothing to change: exit 2, nothing sent. What the server refuses: exit 1, nothing changed.
    nothing = await workly(e2e, "schedule-update", schedule_id)
    assert (nothing.code, nothing.out) == (2, "") and "nothing to change" in nothing.err, nothing
    bad_cron = await workly(e2e, "schedule-update", schedule_id, "--cron", "61 * * * *")
    assert bad_cron.code == 1 and bad_cron.err.startswith("workly: 422 Unprocessable "), bad_cron
    event = await create(e2e, NEW_YEAR, "--event", "report.ready", "--data", "{}")
    no_queue = await workly(e2e, "schedule-update", event["id"], "--queue", "q")
    assert no_queue.code == 1 and "queue" in no_queue.err, no_queue
    assert ok(await workly(e2e, "schedule", schedule_id, "--json")).json() == changed


def picked(found: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: found[name] for name in names}


async def test_create_with_the_task_options_of_enqueue(e2e: E2E) -> None:
    url, done, failed = (e2e.receiver.url(path) for path in ("/options", "/done", "/failed"))
    schedule = await create(
        e2e, NEW_YEAR_AMSTERDAM, url, "--tz", "Europe/Amsterdam", "--max-attempts", "5", "--priority", "7",
        "--key", "k1", "--tenant", "acme", "--stop-on", "404", "--stop-on", "5xx", "--deadline", "10m",
        "--callback-url", done, "--failure-callback-url", failed,
    )  # fmt: skip
    task = schedule["task"]
    assert picked(task, "max_attempts", "priority", "key", "tenant", "stop_on", "deadline") == {
        "max_attempts": 5, "priority": 7, "key": "k1", "tenant": "acme", "stop_on": ["404", "5xx"],
        "deadline": 600,
    }  # fmt: skip
    assert (task["callback_url"], task["failure_callback_url"]) == (done, failed)
    assert (task["timeout"], task["min_backoff"], task["max_backoff"]) == (None, None, None)
    assert ok(await workly(e2e, "schedule", schedule["id"], "--json")).json()["task"] == task

    detail = await detail_fields(e2e, schedule["id"])
    labels = (
        "max attempts",
        "priority",
        "key",
        "tenant",
        "stops on",
        "deadline",
        "callback",
        "failure callback",
    )
    assert picked(detail, *labels) == {
        "max attempts": "5", "priority": "7", "key": "k1", "tenant": "acme", "stops on": "404, 5xx",
        "deadline": "600 s after each task is made", "callback": done, "failure callback": failed,
    }  # fmt: skip
    assert "timeout" not in detail and "min backoff" not in detail
    assert detail["next run"] == f"{shown(new_years(8)[0])} {IN_AMSTERDAM}"

    # The task a firing makes carries them.
    fired = ok(await workly(e2e, "schedule-trigger", schedule["id"], "--json")).json()
    made = ok(await workly(e2e, "task", fired["last_task_id"], "--json")).json()["task"]
    assert picked(made, "max_attempts", "priority", "key", "tenant", "stop_on") == picked(
        task, "max_attempts", "priority", "key", "tenant", "stop_on"
    )

    # With --event, the tenant, key and callbacks are the event's.
    event = await create(
        e2e, NEW_YEAR, "--event", "report.ready", "--data", '{"n": 2}', "--tenant", "acme", "--key", "k2",
        "--callback-url", done,
    )  # fmt: skip
    assert picked(event["event"], "tenant", "key", "callback_url", "failure_callback_url") == {
        "tenant": "acme", "key": "k2", "callback_url": done, "failure_callback_url": None,
    }  # fmt: skip
    shown_event = await detail_fields(e2e, event["id"])
    assert picked(shown_event, "tenant", "key", "callback") == {
        "tenant": "acme",
        "key": "k2",
        "callback": done,
    }
    assert "failure callback" not in shown_event and "priority" not in shown_event


async def test_the_real_entry_point_creates_a_schedule(e2e: E2E) -> None:
    """`python -m workly` in its own process, over the server's socket: what the tests above
    run in-process is the command a user runs."""
    run = await real_workly(e2e, "schedule-create", NEW_YEAR, e2e.receiver.url("/tick"), "--json")
    assert run.code == 0 and not run.err, run
    assert (await e2e.client.get(f"/v1/schedules/{run.json()['id']}")).json()["cron"] == NEW_YEAR
