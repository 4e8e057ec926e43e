"""Endpoint routes of API v1 (docs/webhooks.md), in-process (the real service and app), on SQLite
and on PostgreSQL: create, list, read, change, delete, the write-only secret, enable, disable,
recover, an endpoint's delivery tasks, and the endpoint's own queue, which /v1/queues only reads.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.conftest import HOOK, Api, assert_problem
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings
from workly.models import AttemptResult
from workly.service import Service

OTHER_HOOK = "http://127.0.0.1:9/other"
SECRET_A = "whsec_" + base64.b64encode(b"a" * 32).decode()
SECRET_B = "whsec_" + base64.b64encode(b"b" * 24).decode()
FIELDS = {
    "id",
    "url",
    "description",
    "event_types",
    "tenant",
    "headers",
    "payload_format",
    "filter",
    "max_concurrency",
    "rate_limit",
    "max_attempts",
    "min_backoff",
    "max_backoff",
    "timeout",
    "stop_on",
    "deadline",
    "retention",
    "ordering",
    "enabled",
    "health",
    "created_at",
    "updated_at",
}
DEFAULTS: dict[str, Any] = {
    "description": None,
    "event_types": None,
    "tenant": None,
    "headers": {},
    "payload_format": "raw",
    "filter": None,
    "max_concurrency": 3,
    "rate_limit": None,
    "max_attempts": 10,
    "min_backoff": 1.0,
    "max_backoff": 3600.0,
    "timeout": 30.0,
    "ordering": "none",
    "retention": None,
    "enabled": True,
}
HEALTHY: dict[str, Any] = {
    "state": "healthy",
    "consecutive_failures": 0,
    "failing_since": None,
    "last_success_at": None,
    "disabled_reason": None,
    "probe_at": None,
}
CUSTOM: dict[str, Any] = {
    "url": OTHER_HOOK,
    "description": "billing receiver",
    "event_types": ["invoice.*", "customer.created"],
    "tenant": "acme",
    "headers": {"X-Customer": "42", "Authorization": "Bearer abc"},
    "max_concurrency": 7,
    "rate_limit": 2.5,
    "max_attempts": 4,
    "min_backoff": 0.5,
    "max_backoff": 60.0,
    "timeout": 5.0,
    "ordering": "key",
    "retention": 86400,
}
JSON = {"content-type": "application/json"}
NO_TASKS = {"ready": 0, "running": 0, "succeeded": 0, "failed": 0, "canceled": 0}


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture
async def running(database_url: str) -> AsyncIterator[tuple[Service, Api]]:
    """The service too, for what the API cannot do alone (failing a delivery without a
    dispatcher, waiting for Workly's own announcements)."""
    settings = Settings(database_url=database_url, signing_secret=TEST_SECRET, dispatch=False)
    async with in_process(settings) as (service, http):
        yield service, Api(http)


async def create(api: Api, expect: int = 201, **fields: Any) -> dict[str, Any]:
    response = await api.http.post("/v1/endpoints", json={"url": HOOK, **fields})
    assert response.status_code == expect, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def get(api: Api, endpoint_id: str) -> dict[str, Any]:
    response = await api.http.get(f"/v1/endpoints/{endpoint_id}")
    assert response.status_code == 200, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def patch(api: Api, endpoint_id: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.http.patch(f"/v1/endpoints/{endpoint_id}", json=body)
    assert response.status_code == 200, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def post(api: Api, endpoint_id: str, action: str, body: Any = None) -> dict[str, Any]:
    response = await api.http.post(f"/v1/endpoints/{endpoint_id}/{action}", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def secret_of(api: Api, endpoint_id: str) -> str:
    response = await api.http.get(f"/v1/endpoints/{endpoint_id}/secret")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"signing_secret"}
    secret: str = body["signing_secret"]
    return secret


async def listing(api: Api, **params: Any) -> dict[str, Any]:
    response = await api.http.get("/v1/endpoints", params=params)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    assert set(page) == {"endpoints", "next_cursor"}
    return page


async def listed_ids(api: Api, **params: Any) -> list[str]:
    return [endpoint["id"] for endpoint in (await listing(api, **params))["endpoints"]]


async def walk(api: Api, path: str, plural: str, **params: Any) -> list[list[str]]:
    """Every page's ids, following next_cursor to the end."""
    pages, cursor = [], None
    while True:
        response = await api.http.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        page = response.json()
        pages.append([item["id"] for item in page[plural]])
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "the cursor never ends"


async def publish(api: Api, event_type: str = "invoice.paid", **fields: Any) -> dict[str, Any]:
    response = await api.http.post("/v1/events", json={"type": event_type, "payload": {"n": 1}, **fields})
    assert response.status_code == 201, response.text
    event: dict[str, Any] = response.json()
    return event


async def endpoint_tasks(api: Api, endpoint_id: str, **params: Any) -> dict[str, Any]:
    response = await api.http.get(f"/v1/endpoints/{endpoint_id}/tasks", params=params)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    assert set(page) == {"tasks", "next_cursor"}
    return page


def receivers(event: dict[str, Any]) -> list[str]:
    return [delivery["endpoint_id"] for delivery in event["deliveries"]]


def task_ids(page: dict[str, Any]) -> list[str]:
    return [task["id"] for task in page["tasks"]]


def delivery_to(event: dict[str, Any], endpoint_id: str) -> str:
    found: list[str] = [d["task_id"] for d in event["deliveries"] if d["endpoint_id"] == endpoint_id]
    assert len(found) == 1, event
    return found[0]


def parse_time(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value)


def assert_no_secret(text: str, secret: str) -> None:
    assert "signing_secret" not in text
    assert secret not in text
    assert secret.removeprefix("whsec_") not in text


async def fail_deliveries(service: Service, at: datetime) -> list[str]:
    """Claim every due delivery and record it failed for good at ``at`` (no dispatcher runs
    here); the ids of the tasks failed."""
    storage = service.storage
    claimed = (await storage.dispatch.claim_tasks(100, datetime.now(UTC), uuid.uuid4().hex, 30.0)).tasks
    results = [
        AttemptResult(
            task_seq=task.seq,
            lease_token=task.lease_token,
            attempt=task.attempt,
            started_at=at,
            finished_at=at,
            status_code=500,
            error="HTTP 500",
            response=b"",
            outcome="failed",
            breaker=task.breaker,
            endpoint_id=task.endpoint_id,
            task_id=task.id,
        )
        for task in claimed
    ]
    summary = await storage.dispatch.record_results(results, at)
    assert summary.accepted == len(results)
    return [task.id for task in claimed]


# --- create and read -------------------------------------------------------------------------


async def test_create_answers_201_with_every_field_and_a_queues_defaults(api: Api) -> None:
    before = datetime.now(UTC)
    endpoint = await create(api)
    assert set(endpoint) == FIELDS
    assert endpoint["id"].startswith("ep_") and len(endpoint["id"]) > len("ep_")
    assert endpoint["url"] == HOOK
    assert {name: endpoint[name] for name in DEFAULTS} == DEFAULTS
    assert endpoint["health"] == HEALTHY
    created = parse_time(endpoint["created_at"])
    assert before - timedelta(seconds=1) <= created <= datetime.now(UTC) + timedelta(seconds=1)
    assert endpoint["updated_at"] == endpoint["created_at"]
    assert await get(api, endpoint["id"]) == endpoint


async def test_create_keeps_every_field_given(api: Api) -> None:
    endpoint = await create(api, **CUSTOM)
    assert {name: endpoint[name] for name in CUSTOM} == CUSTOM
    assert endpoint["enabled"] is True and endpoint["health"] == HEALTHY
    assert await get(api, endpoint["id"]) == endpoint


async def test_a_description_may_hold_line_breaks_and_tabs(api: Api) -> None:
    text = "Billing\r\n\tline two \u00e9\u6f22"
    endpoint = await create(api, description=text)
    assert (await get(api, endpoint["id"]))["description"] == text


async def test_repeated_event_types_are_kept_once_in_order(api: Api) -> None:
    endpoint = await create(api, event_types=["b.x", "a.*", "b.x", "a.*", "c"])
    assert endpoint["event_types"] == ["b.x", "a.*", "c"]


async def test_every_endpoint_gets_an_id_of_its_own(api: Api) -> None:
    ids = {(await create(api))["id"] for _ in range(5)}
    assert len(ids) == 5


async def test_unknown_endpoint_ids_are_404(api: Api) -> None:
    for unknown in ("ep_nope", "nope", "ep_" + "0" * 26):
        assert_problem(await api.http.get(f"/v1/endpoints/{unknown}"), 404, "not-found")


UNKNOWN_ID_CALLS: dict[str, tuple[str, str, Any]] = {
    "get": ("GET", "", None),
    "patch": ("PATCH", "", {"description": "x"}),
    "delete": ("DELETE", "", None),
    "secret": ("GET", "/secret", None),
    "enable": ("POST", "/enable", None),
    "disable": ("POST", "/disable", None),
    "recover": ("POST", "/recover", {"since": "2030-01-01T00:00:00Z"}),
    "tasks": ("GET", "/tasks", None),
}


@pytest.mark.parametrize(("method", "suffix", "body"), UNKNOWN_ID_CALLS.values(), ids=UNKNOWN_ID_CALLS.keys())
async def test_every_route_answers_404_for_an_unknown_endpoint(
    api: Api, method: str, suffix: str, body: Any
) -> None:
    known = await create(api)
    response = await api.http.request(method, f"/v1/endpoints/ep_missing{suffix}", json=body)
    problem = assert_problem(response, 404, "not-found")
    assert "ep_missing" in problem["detail"]
    assert await get(api, known["id"]) == known  # nothing else touched
    assert await listed_ids(api) == [known["id"]]


# --- the signing secret -----------------------------------------------------------------------


async def test_a_secret_is_generated_when_none_is_given(api: Api) -> None:
    first, second = await create(api), await create(api)
    secret = await secret_of(api, first["id"])
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) >= 24
    assert await secret_of(api, first["id"]) == secret  # generated once, then kept
    assert await secret_of(api, second["id"]) != secret  # each endpoint its own
    assert secret != TEST_SECRET
    explicit_null = await create(api, signing_secret=None)
    assert (await secret_of(api, explicit_null["id"])).startswith("whsec_")


async def test_a_given_secret_is_kept_and_rotation_lists_are_normalised(api: Api) -> None:
    one = await create(api, signing_secret=SECRET_A)
    assert await secret_of(api, one["id"]) == SECRET_A
    two = await create(api, signing_secret=f"  {SECRET_A}   {SECRET_B} ")
    assert await secret_of(api, two["id"]) == f"{SECRET_A} {SECRET_B}"


async def test_the_secret_never_appears_in_an_endpoint_response(running: tuple[Service, Api]) -> None:
    service, api = running
    response = await api.http.post("/v1/endpoints", json={"url": HOOK, "signing_secret": SECRET_A})
    assert response.status_code == 201
    assert_no_secret(response.text, SECRET_A)
    endpoint_id = response.json()["id"]
    generated = await create(api)
    generated_secret = await secret_of(api, generated["id"])
    answers = [
        await api.http.get(f"/v1/endpoints/{endpoint_id}"),
        await api.http.get("/v1/endpoints"),
        await api.http.patch(f"/v1/endpoints/{endpoint_id}", json={"description": "d"}),
        await api.http.patch(f"/v1/endpoints/{endpoint_id}", json={"signing_secret": SECRET_B}),
        await api.http.post(f"/v1/endpoints/{endpoint_id}/disable"),
        await api.http.post(f"/v1/endpoints/{endpoint_id}/enable"),
        await api.http.get(f"/v1/queues/{endpoint_id}"),
        await api.http.get("/v1/queues"),
    ]
    await service.webhooks.drain_own_events()  # the disable and enable announcements, with the endpoint
    answers.append(await api.http.get("/v1/events"))
    for answer in answers:
        assert answer.status_code == 200, answer.text
        for secret in (SECRET_A, SECRET_B, generated_secret):
            assert_no_secret(answer.text.replace('"has_signing_secret"', ""), secret)
    assert await secret_of(api, endpoint_id) == SECRET_B


# --- listing ---------------------------------------------------------------------------------


async def test_list_is_newest_first(api: Api) -> None:
    assert await listing(api) == {"endpoints": [], "next_cursor": None}
    created = [(await create(api, description=str(n)))["id"] for n in range(4)]
    page = await listing(api)
    assert [e["id"] for e in page["endpoints"]] == created[::-1]
    assert page["next_cursor"] is None
    assert page["endpoints"][0] == await get(api, created[-1])


@pytest.mark.parametrize(("count", "limit"), [(5, 2), (4, 2), (3, 1), (3, 3), (2, 50)])
async def test_cursor_walk_sees_every_endpoint_exactly_once(api: Api, count: int, limit: int) -> None:
    created = [(await create(api))["id"] for _ in range(count)]
    pages = await walk(api, "/v1/endpoints", "endpoints", limit=limit)
    assert [len(page) for page in pages[:-1]] == [limit] * (len(pages) - 1)
    assert 1 <= len(pages[-1]) <= limit
    assert [endpoint_id for page in pages for endpoint_id in page] == created[::-1]


async def test_the_default_page_holds_50(api: Api) -> None:
    created = [(await create(api))["id"] for _ in range(51)]
    first = await listing(api)
    assert [e["id"] for e in first["endpoints"]] == created[:0:-1]
    assert first["next_cursor"] is not None
    assert await listed_ids(api, cursor=first["next_cursor"]) == created[:1]
    assert len(await listed_ids(api, limit=500)) == 51


async def test_the_tenant_filter(api: Api) -> None:
    acme = [(await create(api, tenant="acme"))["id"] for _ in range(3)]
    globex = (await create(api, tenant="globex"))["id"]
    untenanted = (await create(api))["id"]
    assert await listed_ids(api, tenant="acme") == acme[::-1]
    assert await listed_ids(api, tenant="globex") == [globex]
    assert await listed_ids(api, tenant="initech") == []
    assert await listed_ids(api) == [untenanted, globex, *acme[::-1]]
    pages = await walk(api, "/v1/endpoints", "endpoints", tenant="acme", limit=2)
    assert pages == [acme[:0:-1], acme[:1]]


@pytest.mark.parametrize(
    "params", [{"limit": 0}, {"limit": 501}, {"limit": "ten"}, {"tenant": ""}, {"tenant": "a\x01"}]
)
async def test_bad_list_parameters_are_422(api: Api, params: dict[str, Any]) -> None:
    await create(api)
    assert_problem(await api.http.get("/v1/endpoints", params=params), 422, "validation")


BAD_CURSORS = [
    "garbage!",
    "x",
    base64.urlsafe_b64encode(b"s:abc").decode(),
    base64.urlsafe_b64encode(b"t:12").decode(),
    base64.urlsafe_b64encode(b"s:-1").decode(),
    base64.urlsafe_b64encode(b"s:9999999999999999999").decode(),
]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
async def test_a_cursor_not_handed_out_is_400(api: Api, cursor: str) -> None:
    endpoint = await create(api)
    response = await api.http.get("/v1/endpoints", params={"cursor": cursor})
    assert_problem(response, 400, "bad-cursor")
    response = await api.http.get(f"/v1/endpoints/{endpoint['id']}/tasks", params={"cursor": cursor})
    assert_problem(response, 400, "bad-cursor")


# --- PATCH -----------------------------------------------------------------------------------


async def test_patch_changes_only_the_fields_given(api: Api) -> None:
    before = await create(api, signing_secret=SECRET_A, **CUSTOM)
    after = await patch(api, before["id"], {"description": "new", "max_concurrency": 2, "ordering": "none"})
    assert after == {
        **before,
        "description": "new",
        "max_concurrency": 2,
        "ordering": "none",
        "updated_at": after["updated_at"],
    }
    assert after["updated_at"] >= before["updated_at"]
    assert await get(api, before["id"]) == after
    assert await secret_of(api, before["id"]) == SECRET_A
    unchanged = await patch(api, before["id"], {})
    assert {k: v for k, v in unchanged.items() if k != "updated_at"} == {
        k: v for k, v in after.items() if k != "updated_at"
    }


async def test_patch_can_change_every_field(api: Api) -> None:
    endpoint = await create(api)
    changed = await patch(api, endpoint["id"], CUSTOM)
    assert {name: changed[name] for name in CUSTOM} == CUSTOM
    assert await get(api, endpoint["id"]) == changed


async def test_patch_sets_nullable_fields_to_null(api: Api) -> None:
    endpoint = await create(api, **CUSTOM)
    cleared = await patch(
        api, endpoint["id"], {"description": None, "event_types": None, "tenant": None, "rate_limit": None}
    )
    assert (cleared["description"], cleared["event_types"], cleared["tenant"], cleared["rate_limit"]) == (
        None,
        None,
        None,
        None,
    )
    assert cleared["max_concurrency"] == CUSTOM["max_concurrency"]
    assert await get(api, endpoint["id"]) == cleared


async def test_patch_signing_secret_null_generates_a_new_one(api: Api) -> None:
    endpoint = await create(api, signing_secret=SECRET_A)
    await patch(api, endpoint["id"], {"signing_secret": None})
    fresh = await secret_of(api, endpoint["id"])
    assert fresh.startswith("whsec_") and fresh != SECRET_A
    assert len(base64.b64decode(fresh.removeprefix("whsec_"), validate=True)) >= 24
    await patch(api, endpoint["id"], {"signing_secret": f"{SECRET_B} {SECRET_A}"})
    assert await secret_of(api, endpoint["id"]) == f"{SECRET_B} {SECRET_A}"


async def test_patch_of_the_url_moves_the_waiting_deliveries(api: Api) -> None:
    endpoint = await create(api)
    event = await publish(api)
    task_id = delivery_to(event, endpoint["id"])
    await patch(api, endpoint["id"], {"url": OTHER_HOOK})
    assert (await api.task(task_id))["url"] == OTHER_HOOK


async def test_patch_of_the_subscription_changes_which_events_arrive(api: Api) -> None:
    endpoint = await create(api, event_types=["user.*"])
    assert (await publish(api, "invoice.paid"))["deliveries"] == []
    await patch(api, endpoint["id"], {"event_types": ["invoice.paid"]})
    assert [d["endpoint_id"] for d in (await publish(api, "invoice.paid"))["deliveries"]] == [endpoint["id"]]
    # Its deliveries are its tenant's events': with one, its tenant stays.
    used = await api.http.patch(f"/v1/endpoints/{endpoint['id']}", json={"tenant": "acme"})
    assert_problem(used, 409, "conflict")
    unused = await create(api, event_types=["invoice.paid"])
    await patch(api, unused["id"], {"tenant": "acme"})
    assert [d["endpoint_id"] for d in (await publish(api, "invoice.paid"))["deliveries"]] == [endpoint["id"]]
    acme = (await publish(api, "invoice.paid", tenant="acme"))["deliveries"]
    assert [d["endpoint_id"] for d in acme] == [unused["id"]]


PATCH_REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    **{
        f"null {name}": ({name: None}, "validation")
        for name in (
            "url",
            "headers",
            "max_concurrency",
            "max_attempts",
            "min_backoff",
            "max_backoff",
            "timeout",
            "ordering",
        )
    },
    "min above max in one patch": ({"min_backoff": 100, "max_backoff": 50}, "invalid-queue-config"),
    "min above the stored max": ({"min_backoff": 61}, "invalid-queue-config"),
    "max below the stored min": ({"max_backoff": 0.25}, "invalid-queue-config"),
    "max_concurrency 0": ({"max_concurrency": 0}, "validation"),
    "ftp url": ({"url": "ftp://example.com/"}, "validation"),
    "empty event_types": ({"event_types": []}, "validation"),
    "bad pattern": ({"event_types": ["invoice.*.*"]}, "validation"),
    "bad header": ({"headers": {"webhook-id": "x"}}, "validation"),
    "bad secret": ({"signing_secret": "whsec_short"}, "validation"),
    "description with NUL": ({"description": "a\x00"}, "validation"),
    "unknown field": ({"enabled": False}, "validation"),
    "id": ({"id": "ep_other"}, "validation"),
    "a valid field beside a bad one": ({"description": "changed", "timeout": 0}, "validation"),
}


@pytest.mark.parametrize(("body", "slug"), PATCH_REFUSED.values(), ids=PATCH_REFUSED.keys())
async def test_refused_patch_changes_nothing(api: Api, body: dict[str, Any], slug: str) -> None:
    before = await create(api, signing_secret=SECRET_A, **CUSTOM)  # min_backoff 0.5, max_backoff 60
    assert_problem(await api.http.patch(f"/v1/endpoints/{before['id']}", json=body), 422, slug)
    assert await get(api, before["id"]) == before
    assert await secret_of(api, before["id"]) == SECRET_A


# --- DELETE ----------------------------------------------------------------------------------


async def test_delete_removes_the_endpoint_and_its_pending_tasks_keeping_the_finished(api: Api) -> None:
    doomed, kept = await create(api), await create(api)
    events = [await publish(api) for _ in range(3)]
    doomed_tasks = [delivery_to(event, doomed["id"]) for event in events]
    kept_tasks = [delivery_to(event, kept["id"]) for event in events]
    assert (await api.http.post(f"/v1/tasks/{doomed_tasks[0]}/cancel")).status_code == 200

    response = await api.http.delete(f"/v1/endpoints/{doomed['id']}")
    assert response.status_code == 204
    assert response.content == b""

    assert_problem(await api.http.get(f"/v1/endpoints/{doomed['id']}"), 404, "not-found")
    assert_problem(await api.http.get(f"/v1/endpoints/{doomed['id']}/secret"), 404, "not-found")
    for task_id in doomed_tasks[1:]:  # pending: gone with it
        assert_problem(await api.http.get(f"/v1/tasks/{task_id}"), 404, "not-found")
    # Finished (canceled): kept until retention, visible on its event; its queue is not listed.
    assert (await api.task(doomed_tasks[0]))["status"] == "canceled"
    first = (await api.http.get(f"/v1/events/{events[0]['id']}")).json()
    assert {d["endpoint_id"] for d in first["deliveries"]} == {doomed["id"], kept["id"]}
    assert await listed_ids(api) == [kept["id"]]
    assert await api.queue_names() == [kept["id"]]
    assert [(await api.task(task_id))["status"] for task_id in kept_tasks] == ["ready"] * 3
    assert_problem(await api.http.delete(f"/v1/endpoints/{doomed['id']}"), 404, "not-found")
    # Events published afterwards reach only the endpoint that is left.
    assert [d["endpoint_id"] for d in (await publish(api))["deliveries"]] == [kept["id"]]


# --- enable, disable, recover ----------------------------------------------------------------


async def test_disable_and_enable(running: tuple[Service, Api]) -> None:
    service, api = running
    endpoint = await create(api, event_types=["invoice.*"])
    watcher = await create(api, event_types=["workly.*"])  # Workly's own events are stored for it
    waiting = delivery_to(await publish(api), endpoint["id"])

    disabled = await post(api, endpoint["id"], "disable")
    assert disabled["enabled"] is False
    assert disabled["health"]["state"] == "disabled"
    assert isinstance(disabled["health"]["disabled_reason"], str) and disabled["health"]["disabled_reason"]
    assert {k: v for k, v in disabled.items() if k not in ("enabled", "health", "updated_at")} == {
        k: v for k, v in endpoint.items() if k not in ("enabled", "health", "updated_at")
    }
    assert await get(api, endpoint["id"]) == disabled
    assert (await post(api, endpoint["id"], "disable"))["enabled"] is False  # again: no change, 200
    assert (await publish(api))["deliveries"] == []  # no new events
    assert (await api.task(waiting))["status"] == "ready"  # held, not failed

    enabled = await post(api, endpoint["id"], "enable")
    assert enabled["enabled"] is True
    assert enabled["health"] == HEALTHY
    assert await get(api, endpoint["id"]) == enabled
    assert (await post(api, endpoint["id"], "enable"))["enabled"] is True
    assert [d["endpoint_id"] for d in (await publish(api))["deliveries"]] == [endpoint["id"]]
    assert (await api.task(waiting))["status"] == "ready"

    # Each change (not the repeats) is announced as one of Workly's own events.
    await service.webhooks.drain_own_events()
    for kind in ("disabled", "enabled"):
        response = await api.http.get("/v1/events", params={"type": f"workly.endpoint.{kind}"})
        assert response.status_code == 200
        announced = response.json()["events"]
        assert len(announced) == 1, announced
        assert announced[0]["tenant"] is None
        assert announced[0]["payload"]["type"] == f"workly.endpoint.{kind}"
        assert announced[0]["payload"]["data"]["id"] == endpoint["id"]
        assert receivers(announced[0]) == [watcher["id"]]


async def test_a_patch_leaves_a_disabled_endpoint_disabled(api: Api) -> None:
    endpoint = await create(api)
    waiting = delivery_to(await publish(api), endpoint["id"])
    disabled = await post(api, endpoint["id"], "disable")
    changed = await patch(api, endpoint["id"], {"max_concurrency": 9, "url": OTHER_HOOK})
    assert (changed["enabled"], changed["health"]) == (False, disabled["health"])
    assert (await api.queue(endpoint["id"]))["paused"] is True  # its tasks stay held
    assert (await publish(api))["deliveries"] == []
    assert (await api.task(waiting))["status"] == "ready"


async def test_recover_with_nothing_failed_recovers_nothing(api: Api) -> None:
    endpoint = await create(api)
    waiting = delivery_to(await publish(api), endpoint["id"])
    assert await post(api, endpoint["id"], "recover", {"since": "2000-01-01T00:00:00Z"}) == {"recovered": 0}
    assert (await api.task(waiting))["status"] == "ready"


async def test_recover_re_enqueues_the_tasks_that_failed_since(running: tuple[Service, Api]) -> None:
    service, api = running
    endpoint, other = await create(api), await create(api)
    now = datetime.now(UTC)
    early = await publish(api)
    early_ids = await fail_deliveries(service, now - timedelta(hours=2))
    late = [await publish(api) for _ in range(2)]
    late_ids = await fail_deliveries(service, now - timedelta(minutes=10))
    assert len(early_ids) == 2 and len(late_ids) == 4
    failed = await endpoint_tasks(api, endpoint["id"], status="failed")
    assert len(failed["tasks"]) == 3

    since = (now - timedelta(hours=1)).isoformat()
    assert await post(api, endpoint["id"], "recover", {"since": since}) == {"recovered": 2}
    for event in late:
        task = await api.task(delivery_to(event, endpoint["id"]))
        assert (task["status"], task["attempts"]) == ("ready", 1)  # numbered on across the redrive
        assert (await api.task(delivery_to(event, other["id"])))["status"] == "failed"  # not its tasks
    assert (await api.task(delivery_to(early, endpoint["id"])))["status"] == "failed"
    assert await post(api, endpoint["id"], "recover", {"since": since}) == {"recovered": 0}

    everything = "2000-01-01T00:00:00+02:00"
    assert await post(api, endpoint["id"], "recover", {"since": everything}) == {"recovered": 1}
    assert await post(api, other["id"], "recover", {"since": everything}) == {"recovered": 3}


@pytest.mark.parametrize(
    ("since", "recovered"),
    [
        ("0001-01-01T00:00:00+01:00", 1),  # not even a year in UTC
        ("0001-01-01T00:00:00Z", 1),
        ("1969-12-31T23:59:59Z", 1),
        ("2999-12-31T23:59:59Z", 0),
        ("9999-12-31T23:59:59Z", 0),
        ("9999-12-31T23:59:59-01:00", 0),  # past the year 9999 in UTC
    ],
)
async def test_recover_since_any_time_at_all(
    running: tuple[Service, Api], since: str, recovered: int
) -> None:
    service, api = running
    endpoint = await create(api)
    task_id = delivery_to(await publish(api), endpoint["id"])
    await fail_deliveries(service, datetime.now(UTC))
    assert await post(api, endpoint["id"], "recover", {"since": since}) == {"recovered": recovered}
    assert (await api.task(task_id))["status"] == ("ready" if recovered else "failed")


@pytest.mark.parametrize(
    "body",
    [{}, {"since": "2030-01-01T00:00:00"}, {"since": "yesterday"}, {"since": None}, {"since": 0, "x": 1}],
)
async def test_bad_recover_bodies_are_422(api: Api, body: dict[str, Any]) -> None:
    endpoint = await create(api)
    response = await api.http.post(f"/v1/endpoints/{endpoint['id']}/recover", json=body)
    assert_problem(response, 422, "validation")


# --- an endpoint's delivery tasks ------------------------------------------------------------


async def test_an_endpoints_tasks_are_its_deliveries_newest_first(api: Api) -> None:
    endpoint = await create(api, headers={"X-Customer": "42"})
    other = await create(api)
    events = [await publish(api, key=f"k{n}") for n in range(3)]
    mine = [delivery_to(event, endpoint["id"]) for event in events]

    page = await endpoint_tasks(api, endpoint["id"])
    assert task_ids(page) == mine[::-1]
    assert page["next_cursor"] is None
    for task, event in zip(page["tasks"], events[::-1], strict=True):
        assert task["event_id"] == event["id"]
        assert task["endpoint_id"] == endpoint["id"]
        assert task["queue"] == endpoint["id"]
        assert (task["url"], task["method"], task["status"]) == (HOOK, "POST", "ready")
        assert task["headers"] == {"X-Customer": "42", "content-type": "application/json"}
        assert task["body"] == {"n": 1}
        assert task["key"] == event["key"]
        assert task == await api.task(task["id"])
    assert (
        task_ids(await endpoint_tasks(api, other["id"]))
        == [delivery_to(e, other["id"]) for e in events][::-1]
    )

    assert (await api.http.post(f"/v1/tasks/{mine[1]}/cancel")).status_code == 200
    assert task_ids(await endpoint_tasks(api, endpoint["id"], status="canceled")) == [mine[1]]
    assert task_ids(await endpoint_tasks(api, endpoint["id"], status="ready")) == [mine[2], mine[0]]
    assert task_ids(await endpoint_tasks(api, endpoint["id"], status="failed")) == []
    pages = await walk(api, f"/v1/endpoints/{endpoint['id']}/tasks", "tasks", limit=2)
    assert pages == [mine[:0:-1], mine[:1]]


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 501}, {"status": "done"}])
async def test_bad_task_list_parameters_are_422(api: Api, params: dict[str, Any]) -> None:
    endpoint = await create(api)
    response = await api.http.get(f"/v1/endpoints/{endpoint['id']}/tasks", params=params)
    assert_problem(response, 422, "validation")


# --- the endpoint's queue --------------------------------------------------------------------


async def test_the_endpoints_queue_can_be_read(api: Api) -> None:
    endpoint = await create(api, max_concurrency=5, rate_limit=3, max_attempts=4, ordering="key")
    event = await publish(api)
    queue = await api.queue(endpoint["id"])
    assert queue["name"] == endpoint["id"]
    assert (queue["max_concurrency"], queue["rate_limit"], queue["max_attempts"], queue["ordering"]) == (
        5,
        3.0,
        4,
        "key",
    )
    assert queue["counts"] == {**NO_TASKS, "ready": 1}
    assert await api.queue_names() == [endpoint["id"]]
    response = await api.http.get(f"/v1/queues/{endpoint['id']}/tasks")
    assert response.status_code == 200
    assert [t["id"] for t in response.json()["tasks"]] == [delivery_to(event, endpoint["id"])]


QUEUE_WRITES: dict[str, tuple[str, str, Any]] = {
    "put": ("PUT", "", {"max_concurrency": 50}),
    "put with an empty body": ("PUT", "", {}),
    "patch": ("PATCH", "", {"max_concurrency": 50}),
    "delete": ("DELETE", "", None),
    "pause": ("POST", "/pause", None),
    "resume": ("POST", "/resume", None),
    "purge": ("POST", "/purge", None),
    "enqueue": ("POST", "/tasks", {"url": HOOK}),
    "enqueue with an idempotency key": ("POST", "/tasks", {"url": HOOK, "idempotency_key": "k"}),
    "enqueue a batch": ("POST", "/tasks/batch", {"tasks": [{"url": HOOK}, {"url": HOOK}]}),
}


@pytest.mark.parametrize(("method", "suffix", "body"), QUEUE_WRITES.values(), ids=QUEUE_WRITES.keys())
async def test_the_endpoints_queue_cannot_be_written_through_queues(
    api: Api, method: str, suffix: str, body: Any
) -> None:
    endpoint = await create(api)
    task_id = delivery_to(await publish(api), endpoint["id"])
    queue = await api.queue(endpoint["id"])

    response = await api.http.request(method, f"/v1/queues/{endpoint['id']}{suffix}", json=body)
    problem = assert_problem(response, 409, "conflict")
    assert f"/v1/endpoints/{endpoint['id']}" in problem["detail"]

    assert await api.queue(endpoint["id"]) == queue
    assert await get(api, endpoint["id"]) == endpoint
    assert task_ids(await endpoint_tasks(api, endpoint["id"])) == [task_id]
    assert (await api.task(task_id))["status"] == "ready"


async def test_a_disabled_endpoints_queue_cannot_be_resumed(api: Api) -> None:
    endpoint = await create(api)
    await post(api, endpoint["id"], "disable")
    assert_problem(await api.http.post(f"/v1/queues/{endpoint['id']}/resume"), 409, "conflict")
    assert (await get(api, endpoint["id"]))["enabled"] is False
    assert (await publish(api))["deliveries"] == []


# --- bad input stores nothing ----------------------------------------------------------------

LONG_URL = "http://127.0.0.1:9/" + "a" * 4096
BAD_ENDPOINTS: dict[str, dict[str, Any]] = {
    "unknown field": {"events": ["invoice.paid"]},
    "id given": {"id": "ep_mine"},
    "enabled given": {"enabled": False},
    "pattern *": {"event_types": ["*"]},
    "pattern with a trailing dot": {"event_types": ["invoice."]},
    "pattern with a leading dot": {"event_types": [".x"]},
    "pattern with a space": {"event_types": ["a b"]},
    "pattern with two stars": {"event_types": ["invoice.*.*"]},
    "pattern with a star inside": {"event_types": ["invoice.*.paid"]},
    "pattern **": {"event_types": ["invoice.**"]},
    "empty pattern": {"event_types": [""]},
    "empty list": {"event_types": []},
    "one good one bad": {"event_types": ["invoice.paid", "a..b"]},
    "pattern too long": {"event_types": ["a" * 129]},
    "101 patterns": {"event_types": [f"t{n}" for n in range(101)]},
    "event_types a string": {"event_types": "invoice.paid"},
    "no url": {"url": None},
    "ftp url": {"url": "ftp://example.com/hook"},
    "url without a host": {"url": "http:///hook"},
    "relative url": {"url": "/hook"},
    "url with credentials": {"url": "http://user:pw@127.0.0.1:9/hook"},
    "url with a user": {"url": "http://user@127.0.0.1:9/hook"},
    "url with a space": {"url": "http://127.0.0.1:9/a b"},
    "url with a newline": {"url": "http://127.0.0.1:9/hook\n"},
    "url with a tab": {"url": "http://127.0.0.1:9/\thook"},
    "url over 4096 characters": {"url": LONG_URL},
    "url port 0": {"url": "http://127.0.0.1:0/"},
    "header with CRLF": {"headers": {"X-A": "a\r\nX-B: b"}},
    "header with LF": {"headers": {"X-A": "a\nb"}},
    "header webhook-signature": {"headers": {"webhook-signature": "v1,abc"}},
    "header Webhook-Id": {"headers": {"Webhook-Id": "evt_x"}},
    "header webhook-timestamp": {"headers": {"webhook-timestamp": "1"}},
    "header host": {"headers": {"Host": "example.com"}},
    "header content-length": {"headers": {"content-length": "3"}},
    "header name with a space": {"headers": {"X A": "b"}},
    "header value not a string": {"headers": {"X-A": 1}},
    "header twice": {"headers": {"X-A": "1", "x-a": "2"}},
    "headers a list": {"headers": [["X-A", "1"]]},
    "secret without whsec_": {"signing_secret": base64.b64encode(b"k" * 32).decode()},
    "secret with bad base64": {"signing_secret": "whsec_not*base64!"},
    "secret too short": {"signing_secret": "whsec_" + base64.b64encode(b"k" * 15).decode()},
    "secret empty": {"signing_secret": ""},
    "secret blank": {"signing_secret": "   "},
    "one good secret, one bad": {"signing_secret": f"{SECRET_A} whsec_x"},
    "max_concurrency 0": {"max_concurrency": 0},
    "rate_limit 0": {"rate_limit": 0},
    "max_attempts 0": {"max_attempts": 0},
    "timeout 0": {"timeout": 0},
    "min_backoff above max_backoff": {"min_backoff": 10, "max_backoff": 5},
    "ordering fifo": {"ordering": "fifo"},
    "description too long": {"description": "d" * 1025},
    "description with NUL": {"description": "a\x00b"},
    "description with ESC": {"description": "a\x1b[31mred"},
    "tenant empty": {"tenant": ""},
    "tenant with a control character": {"tenant": "a\x00b"},
    "tenant too long": {"tenant": "t" * 256},
    "lone surrogate": {"description": "\ud800"},
}


@pytest.mark.parametrize("fields", BAD_ENDPOINTS.values(), ids=BAD_ENDPOINTS.keys())
async def test_a_bad_endpoint_is_422_and_stores_nothing(api: Api, fields: dict[str, Any]) -> None:
    body = {"url": HOOK, **fields}
    if body["url"] is None:
        del body["url"]
    # json.dumps escapes a lone surrogate (\ud800), which httpx's json= cannot encode.
    response = await api.http.post("/v1/endpoints", content=json.dumps(body), headers=JSON)
    slug = "invalid-queue-config" if "min_backoff" in fields else "validation"
    assert_problem(response, 422, slug)
    assert await listing(api) == {"endpoints": [], "next_cursor": None}
    assert await api.queue_names() == []


async def test_a_secret_in_a_refusal_is_not_repeated(api: Api) -> None:
    almost = "whsec_" + base64.b64encode(b"s" * 15).decode()
    response = await api.http.post(
        "/v1/endpoints", json={"url": HOOK, "signing_secret": f"{SECRET_A} {almost}"}
    )
    assert_problem(response, 422, "validation")
    assert SECRET_A not in response.text and almost not in response.text


@pytest.mark.parametrize(
    ("content", "headers", "status", "slug"),
    [
        (b'{"url": ', {"content-type": "application/json"}, 400, "malformed-json"),
        (b"[]", {"content-type": "application/json"}, 422, "validation"),
        (f'{{"url": "{HOOK}"}}'.encode(), {"content-type": "text/plain"}, 415, "unsupported-media-type"),
    ],
)
async def test_a_body_that_is_not_an_endpoint_stores_nothing(
    api: Api, content: bytes, headers: dict[str, str], status: int, slug: str
) -> None:
    response = await api.http.post("/v1/endpoints", content=content, headers=headers)
    assert_problem(response, status, slug)
    assert await listing(api) == {"endpoints": [], "next_cursor": None}
    assert await api.queue_names() == []


async def test_a_tenant_endpoint_cannot_subscribe_to_workly_events(api: Api) -> None:
    """Workly's own events are untenanted: such a subscription would wait in vain."""
    refused = await api.http.post(
        "/v1/endpoints", json={"url": HOOK, "tenant": "acme", "event_types": ["invoice.*", "workly.*"]}
    )
    assert_problem(refused, 422)
    assert (await api.http.get("/v1/endpoints")).json()["endpoints"] == []
    created = await api.http.post(
        "/v1/endpoints", json={"url": HOOK, "tenant": "acme", "event_types": ["a.*"]}
    )
    endpoint_id = created.json()["id"]
    patched = await api.http.patch(
        f"/v1/endpoints/{endpoint_id}", json={"event_types": ["workly.task.failed"]}
    )
    assert_problem(patched, 422)
    assert (await api.http.get(f"/v1/endpoints/{endpoint_id}")).json()["event_types"] == ["a.*"]
    untenanted = await api.http.patch(
        f"/v1/endpoints/{endpoint_id}", json={"tenant": None, "event_types": ["workly.*"]}
    )
    assert untenanted.status_code == 200, untenanted.text
