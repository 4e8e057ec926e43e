"""Schedule routes as the API answers them (docs/schedules.md): fields, next runs, changes
that move the next run, pause/resume/trigger/delete, and bad input refused with nothing
stored. The scheduler does not run here (``dispatch=False``): only triggers fire."""

from __future__ import annotations

import base64
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.conftest import HOOK, Api, assert_problem

FIELDS = {
    "id", "name", "cron", "timezone", "queue", "task", "event", "paused", "catch_up", "next_run_at",
    "next_runs", "last_run_at", "last_task_id", "last_event_id", "created_at", "updated_at",
}  # fmt: skip


async def create(api: Api, body: dict[str, Any], expect: int = 201) -> dict[str, Any]:
    response = await api.http.post("/v1/schedules", json=body)
    assert response.status_code == expect, response.text
    created: dict[str, Any] = response.json()
    return created


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def schedule_ids(api: Api) -> list[str]:
    response = await api.http.get("/v1/schedules")
    assert response.status_code == 200
    return [s["id"] for s in response.json()["schedules"]]


async def test_a_schedule_is_answered_201_with_its_next_runs(api: Api) -> None:
    body = {
        "name": "digest", "cron": "0 9 * * *", "timezone": "Europe/Amsterdam", "queue": "mail",
        "task": {"url": HOOK, "body": {"kind": "digest"}, "headers": {"x-a": "1"}, "max_attempts": 3},
    }  # fmt: skip
    response = await api.http.post("/v1/schedules", json=body)
    assert response.status_code == 201, response.text
    schedule = response.json()
    assert set(schedule) == FIELDS
    assert response.headers["location"] == f"/v1/schedules/{schedule['id']}"
    assert schedule["id"].startswith("sch_")
    assert (schedule["name"], schedule["cron"], schedule["timezone"]) == (
        "digest",
        "0 9 * * *",
        "Europe/Amsterdam",
    )
    assert (schedule["queue"], schedule["paused"], schedule["catch_up"]) == ("mail", False, "latest")
    assert schedule["task"]["body"] == {"kind": "digest"} and schedule["task"]["max_attempts"] == 3
    assert schedule["task"]["url"] == HOOK and schedule["event"] is None
    runs = [parse(run) for run in schedule["next_runs"]]
    assert len(runs) == 5 and schedule["next_run_at"] == schedule["next_runs"][0]
    # 09:00 in Amsterdam: 08:00 UTC in winter, 07:00 in summer; one a day, in the future.
    assert all(run.hour in (7, 8) and run.minute == 0 for run in runs)
    assert all(later - earlier in (timedelta(hours=23), timedelta(hours=24), timedelta(hours=25))
               for earlier, later in itertools.pairwise(runs))  # fmt: skip
    assert runs[0] > datetime.now(UTC)
    assert (schedule["last_run_at"], schedule["last_task_id"], schedule["last_event_id"]) == (
        None,
        None,
        None,
    )
    fetched = await api.http.get(f"/v1/schedules/{schedule['id']}")
    assert fetched.status_code == 200 and fetched.json() == schedule


async def test_defaults_queue_default_utc_and_catch_up_latest(api: Api) -> None:
    schedule = await create(api, {"cron": "*/5 * * * *", "task": {"url": HOOK}})
    assert (schedule["queue"], schedule["timezone"], schedule["catch_up"], schedule["name"]) == (
        "default", "UTC", "latest", None,
    )  # fmt: skip
    runs = [parse(run) for run in schedule["next_runs"]]
    assert all(run.minute % 5 == 0 for run in runs)
    assert [b - a for a, b in itertools.pairwise(runs)] == [timedelta(minutes=5)] * 4


async def test_schedules_list_newest_first_with_a_cursor(api: Api) -> None:
    ids = [(await create(api, {"cron": "* * * * *", "task": {"url": HOOK}}))["id"] for _ in range(3)]
    first = (await api.http.get("/v1/schedules", params={"limit": 2})).json()
    assert [s["id"] for s in first["schedules"]] == ids[::-1][:2]
    rest = (await api.http.get("/v1/schedules", params={"cursor": first["next_cursor"]})).json()
    assert ([s["id"] for s in rest["schedules"]], rest["next_cursor"]) == ([ids[0]], None)
    assert_problem(await api.http.get("/v1/schedules", params={"cursor": "nope"}), 400, "bad-cursor")


async def test_a_new_cron_or_zone_moves_the_next_run_and_other_changes_keep_it(api: Api) -> None:
    schedule = await create(api, {"cron": "0 9 * * *", "task": {"url": HOOK}})
    path = f"/v1/schedules/{schedule['id']}"
    renamed = (await api.http.patch(path, json={"name": "n", "catch_up": "none"})).json()
    assert renamed["next_run_at"] == schedule["next_run_at"] and renamed["name"] == "n"
    assert renamed["catch_up"] == "none"
    hourly = (await api.http.patch(path, json={"cron": "30 * * * *"})).json()
    assert parse(hourly["next_run_at"]).minute == 30
    assert parse(hourly["next_run_at"]) - datetime.now(UTC) <= timedelta(hours=1)
    zoned = (await api.http.patch(path, json={"cron": "0 12 * * *", "timezone": "Asia/Kolkata"})).json()
    assert (parse(zoned["next_run_at"]).hour, parse(zoned["next_run_at"]).minute) == (6, 30)  # 12:00 IST
    moved = (await api.http.patch(path, json={"queue": "other", "task": {"url": HOOK, "priority": 7}})).json()
    assert moved["queue"] == "other" and moved["task"]["priority"] == 7
    assert moved["next_run_at"] == zoned["next_run_at"]
    requeued = (await api.http.patch(path, json={"queue": "third"})).json()
    assert requeued["queue"] == "third" and requeued["task"]["priority"] == 7
    unnamed = (await api.http.patch(path, json={"name": None})).json()
    assert unnamed["name"] is None


async def test_pause_clears_the_next_run_and_resume_computes_it_from_now(api: Api) -> None:
    schedule = await create(api, {"cron": "* * * * *", "task": {"url": HOOK}})
    paused = (await api.http.post(f"/v1/schedules/{schedule['id']}/pause")).json()
    assert (paused["paused"], paused["next_run_at"], paused["next_runs"]) == (True, None, [])
    assert (await api.http.post(f"/v1/schedules/{schedule['id']}/pause")).json()["paused"] is True
    resumed = (await api.http.post(f"/v1/schedules/{schedule['id']}/resume")).json()
    assert resumed["paused"] is False and parse(resumed["next_run_at"]) > datetime.now(UTC) - timedelta(
        seconds=1
    )
    assert len(resumed["next_runs"]) == 5
    created_paused = await create(api, {"cron": "* * * * *", "task": {"url": HOOK}, "paused": True})
    assert created_paused["next_run_at"] is None


async def test_trigger_makes_one_task_now_and_keeps_the_next_run(api: Api) -> None:
    schedule = await create(api, {"cron": "0 0 1 1 *", "queue": "q", "task": {"url": HOOK, "body": {"a": 1}}})
    before = datetime.now(UTC)
    triggered = await api.http.post(f"/v1/schedules/{schedule['id']}/trigger")
    assert triggered.status_code == 200, triggered.text
    after = triggered.json()
    assert after["next_run_at"] == schedule["next_run_at"]
    task = await api.task(after["last_task_id"])
    assert task["queue"] == "q" and task["body"] == {"a": 1} and task["status"] == "ready"
    assert task["idempotency_key"] == f"schedule:{schedule['id']}:{after['last_run_at']}"
    assert before - timedelta(seconds=1) <= parse(task["run_at"]) <= datetime.now(UTC)
    again = (await api.http.post(f"/v1/schedules/{schedule['id']}/trigger")).json()
    assert again["last_task_id"] != task["id"]
    assert (await api.counts("q"))["ready"] == 2


async def test_an_event_schedule_publishes_on_trigger(api: Api) -> None:
    endpoint = await api.http.post("/v1/endpoints", json={"url": HOOK, "event_types": ["report.*"]})
    assert endpoint.status_code == 201
    schedule = await create(
        api, {"cron": "0 * * * *", "event": {"type": "report.ready", "payload": {"n": 1}}}
    )
    assert schedule["queue"] is None and schedule["task"] is None
    assert schedule["event"]["type"] == "report.ready" and schedule["event"]["payload"] == {"n": 1}
    after = (await api.http.post(f"/v1/schedules/{schedule['id']}/trigger")).json()
    assert after["last_task_id"] is None
    event = (await api.http.get(f"/v1/events/{after['last_event_id']}")).json()
    assert event["type"] == "report.ready" and [d["endpoint_id"] for d in event["deliveries"]] == [
        endpoint.json()["id"]
    ]


async def test_delete_leaves_the_tasks_it_made(api: Api) -> None:
    schedule = await create(api, {"cron": "* * * * *", "queue": "q", "task": {"url": HOOK}})
    made = (await api.http.post(f"/v1/schedules/{schedule['id']}/trigger")).json()["last_task_id"]
    deleted = await api.http.delete(f"/v1/schedules/{schedule['id']}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert_problem(await api.http.get(f"/v1/schedules/{schedule['id']}"), 404, "not-found")
    assert (await api.task(made))["status"] == "ready"
    assert_problem(await api.http.delete(f"/v1/schedules/{schedule['id']}"), 404, "not-found")


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", ""),
        ("PATCH", ""),
        ("DELETE", ""),
        ("POST", "/pause"),
        ("POST", "/resume"),
        ("POST", "/trigger"),
    ],
)
async def test_unknown_schedules_are_404(api: Api, method: str, suffix: str) -> None:
    response = await api.http.request(
        method, f"/v1/schedules/sch_nope{suffix}", json={} if method == "PATCH" else None
    )
    assert_problem(response, 404, "not-found")


TASK = {"url": HOOK}


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"cron": "61 * * * *", "task": TASK}, 422),
        ({"cron": "* * * *", "task": TASK}, 422),
        ({"cron": "* * * * * *", "task": TASK}, 422),
        ({"cron": "0 0 30 2 *", "task": TASK}, 422),
        ({"cron": "", "task": TASK}, 422),
        ({"cron": 5, "task": TASK}, 422),
        ({"task": TASK}, 422),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus", "task": TASK}, 422),
        ({"cron": "* * * * *", "timezone": "", "task": TASK}, 422),
        ({"cron": "* * * * *", "task": TASK, "event": {"type": "a.b", "payload": 1}}, 422),
        ({"cron": "* * * * *"}, 422),
        ({"cron": "* * * * *", "task": {"url": "ftp://x/"}}, 422),
        ({"cron": "* * * * *", "task": {"url": "http://u:p@127.0.0.1/"}}, 422),
        ({"cron": "* * * * *", "task": {"url": HOOK, "max_attempts": 0}}, 422),
        ({"cron": "* * * * *", "task": {"url": HOOK, "headers": {"host": "x"}}}, 422),
        ({"cron": "* * * * *", "task": {"url": HOOK, "delay": 5}}, 422),
        ({"cron": "* * * * *", "task": {"url": HOOK, "run_at": "2030-01-01T00:00:00Z"}}, 422),
        ({"cron": "* * * * *", "task": {"url": HOOK, "idempotency_key": "k"}}, 422),
        ({"cron": "* * * * *", "task": {"url": HOOK, "queue": "q"}}, 422),
        ({"cron": "* * * * *", "queue": "bad/name", "task": TASK}, 422),
        ({"cron": "* * * * *", "queue": "q", "event": {"type": "a.b", "payload": 1}}, 422),
        ({"cron": "* * * * *", "event": {"type": "a.b"}}, 422),
        ({"cron": "* * * * *", "event": {"type": "a.b", "payload": 1, "delay": 1}}, 422),
        ({"cron": "* * * * *", "task": TASK, "catch_up": "all"}, 422),
        ({"cron": "* * * * *", "task": TASK, "paused": "maybe"}, 422),
        ({"cron": "* * * * *", "task": TASK, "unknown": 1}, 422),
        ({"cron": "* * * * *", "task": TASK, "name": ""}, 422),
        ({"cron": "* * * * *", "task": TASK, "name": "a\nb"}, 422),
        ({"cron": "* * * * *", "queue": "ep_x", "task": TASK}, 409),
        ({"cron": "* * * * *", "task": {"url": HOOK, "body_base64": "QQ==" * 400_000}}, 413),
    ],
)
async def test_bad_input_is_refused_and_nothing_is_stored(
    api: Api, body: dict[str, Any], status: int
) -> None:
    response = await api.http.post("/v1/schedules", json=body)
    assert_problem(response, status)
    assert await schedule_ids(api) == []
    assert await api.queue_names() == []


@pytest.mark.parametrize(
    "patch",
    [
        {"cron": None}, {"cron": "nope"}, {"timezone": "Nowhere/Land"}, {"timezone": None}, {"paused": None},
        {"task": {"url": HOOK}, "event": {"type": "a.b", "payload": 1}}, {"task": {"url": HOOK, "delay": 1}},
        {"catch_up": "sometimes"}, {"unknown": True}, {"task": None},
    ],
)  # fmt: skip
async def test_bad_changes_are_refused_and_change_nothing(api: Api, patch: dict[str, Any]) -> None:
    schedule = await create(api, {"cron": "* * * * *", "task": TASK})
    assert_problem(await api.http.patch(f"/v1/schedules/{schedule['id']}", json=patch), 422)
    assert (await api.http.get(f"/v1/schedules/{schedule['id']}")).json() == schedule


async def test_an_event_schedule_takes_no_queue_in_a_change(api: Api) -> None:
    schedule = await create(api, {"cron": "* * * * *", "event": {"type": "a.b", "payload": 1}})
    path = f"/v1/schedules/{schedule['id']}"
    assert_problem(await api.http.patch(path, json={"queue": "q"}), 422, "invalid-schedule")
    assert_problem(
        await api.http.patch(path, json={"queue": "q", "event": {"type": "a.c", "payload": 2}}), 422,
        "invalid-schedule",
    )  # fmt: skip
    assert (await api.http.get(path)).json() == schedule
    # A task instead: it goes to the queue given, or "default".
    turned = (await api.http.patch(path, json={"task": {"url": HOOK}})).json()
    assert (turned["queue"], turned["event"]) == ("default", None)


@pytest.mark.parametrize(
    ("cron", "zone"),
    [
        ("0 0 */31 * 1#5", "UTC"),  # day 31 that is also a fifth Monday: never
        ("0 0 31 2,4 *", "UTC"),  # refused by cronsim already
        ("30 2 * 3 0L", "Europe/Amsterdam"),  # the last Sunday of March at 02:30: always skipped there
    ],
)
async def test_a_cron_that_never_fires_is_refused(api: Api, cron: str, zone: str) -> None:
    response = await api.http.post("/v1/schedules", json={"cron": cron, "timezone": zone, "task": TASK})
    body = assert_problem(response, 422)
    assert "never fires" in body["detail"] or "day-of-month" in body["detail"]
    assert await schedule_ids(api) == []
    schedule = await create(api, {"cron": "* * * * *", "task": TASK})
    refused = await api.http.patch(f"/v1/schedules/{schedule['id']}", json={"cron": cron, "timezone": zone})
    assert_problem(refused, 422)
    assert (await api.http.get(f"/v1/schedules/{schedule['id']}")).json() == schedule


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "Factory", "right/UTC"])
async def test_names_that_are_not_places_are_not_time_zones(api: Api, zone: str) -> None:
    response = await api.http.post(
        "/v1/schedules", json={"cron": "* * * * *", "timezone": zone, "task": TASK}
    )
    assert "time zone" in assert_problem(response, 422)["detail"]


async def test_a_schedule_as_read_can_be_sent_back_as_a_change(api: Api) -> None:
    task = {
        "url": HOOK,
        "body": {"a": [1, 2]},
        "headers": {"x-a": "1"},
        "max_attempts": 4,
        "stop_on": ["404"],
    }
    schedule = await create(api, {"cron": "* * * * *", "task": task})
    assert "body_base64" not in schedule["task"] and schedule["task"]["body"] == {"a": [1, 2]}
    binary = await create(api, {"cron": "* * * * *", "task": {"url": HOOK, "body_base64": "AP8="}})
    assert "body" not in binary["task"] and binary["task"]["body_base64"] == "AP8="
    for one in (schedule, binary):
        path = f"/v1/schedules/{one['id']}"
        sent_back = await api.http.patch(path, json={"task": one["task"], "cron": one["cron"]})
        assert sent_back.status_code == 200, sent_back.text
        assert sent_back.json()["task"] == one["task"]


async def test_the_api_reference_leaves_out_what_a_schedule_refuses(api: Api) -> None:
    schemas = (await api.http.get("/openapi.json")).json()["components"]["schemas"]
    for name in ("ScheduleTaskIn", "ScheduleEventIn"):
        assert not {"delay", "run_at", "idempotency_key"} & schemas[name]["properties"].keys()
    assert (
        "url" in schemas["ScheduleTaskIn"]["properties"]
        and "type" in schemas["ScheduleEventIn"]["properties"]
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("task", "shown"),
    [
        ({"url": HOOK, "body_base64": b64(b"hello")}, "body_base64"),  # as "body" it would become JSON
        ({"url": HOOK, "body_base64": b64(b"not json"), "headers": {"content-type": "application/json"}},
         "body_base64"),
        ({"url": HOOK, "body_base64": b64(b'{"a": 1}')}, "body_base64"),  # not compact
        ({"url": HOOK, "body": "plain", "headers": {"content-type": "text/plain"}}, "body"),
        ({"url": HOOK, "body": None}, "body_base64"),  # no body at all: body_base64 null
        ({"url": HOOK, "body": {"n": None}}, "body"),
    ],
)  # fmt: skip
async def test_a_read_task_sent_back_stores_the_same_bytes(
    api: Api, task: dict[str, Any], shown: str
) -> None:
    schedule = await create(api, {"cron": "* * * * *", "queue": "q", "task": task})
    assert shown in schedule["task"] and ({"body", "body_base64"} - {shown}).isdisjoint(schedule["task"])
    before = await api.task(
        (await api.http.post(f"/v1/schedules/{schedule['id']}/trigger")).json()["last_task_id"]
    )
    path = f"/v1/schedules/{schedule['id']}"
    assert (await api.http.patch(path, json={"task": schedule["task"]})).status_code == 200
    after = await api.task((await api.http.post(f"{path}/trigger")).json()["last_task_id"])
    assert (after["body_base64"], after["headers"]) == (before["body_base64"], before["headers"])


@pytest.mark.parametrize(
    ("event", "shown"),
    [
        ({"type": "a.b", "payload": None}, "payload"),
        ({"type": "a.b", "payload_base64": b64(b"null")}, "payload_base64"),  # bytes, not JSON
        ({"type": "a.b", "payload_base64": b64(b"\x00\xff")}, "payload_base64"),
    ],
)
async def test_a_read_event_sent_back_publishes_the_same_payload(
    api: Api, event: dict[str, Any], shown: str
) -> None:
    schedule = await create(api, {"cron": "* * * * *", "event": event})
    assert shown in schedule["event"] and ({"payload", "payload_base64"} - {shown}).isdisjoint(
        schedule["event"]
    )
    path = f"/v1/schedules/{schedule['id']}"
    assert (await api.http.patch(path, json={"event": schedule["event"]})).json()["event"] == schedule[
        "event"
    ]
