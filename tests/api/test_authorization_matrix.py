"""The authorization matrix (DESIGN.md "Tenants, API keys, audit log"), generated over every
route of the OpenAPI document, every role, with and without a tenant scope, and an object of
the key's own tenant and one of another, on both backends.

The expected answer of each cell comes from ``RULES`` below, the design's table restated
here (not imported from workly/access.py): the permission each route needs and what it
addresses. A route missing from ``RULES`` fails ``test_every_route_is_in_the_matrix``, so a
new route cannot escape it. Every cell checks that a tenant key's answer holds nothing of
the other tenant, and each route's test checks that the other tenant's endpoint was not
changed by the tenant keys.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import pytest

from tests.api.conftest import HOOK
from tests.support.servers import AUTH, TEST_SECRET, TEST_TOKEN, in_process
from workly.app import create_app
from workly.config import Settings
from workly.service import Service
from workly.signing import generate_key_pair

Needs = Literal["read", "read_messages", "read_secret", "publish", "write", "manage_access", "nothing"]
# What the route addresses: "global" (no tenant's: queues, plain tasks, schedules,
# operations, keys, audit, metrics), "list"/"create" (a tenant key lists or makes its own),
# or the tenant-owned object named by the path (its own tenant's, or the other's).
# "catalogue": event types, which every key reads (a tenant's too) and only an untenanted
# key changes (a tenant key: 403, it knows they exist).
Addresses = Literal[
    "global", "list", "create", "endpoint", "event", "task", "tenant", "own-record", "catalogue"
]
GRANTS = {
    "admin": {"read", "read_messages", "read_secret", "publish", "write", "manage_access", "nothing"},
    "reader": {"read", "read_messages", "nothing"},
    "publisher": {"publish", "read_messages", "nothing"},
}
RULES: dict[tuple[str, str], tuple[Needs, Addresses]] = {
    ("POST", "/v1/queues/{queue}/tasks"): ("publish", "global"),
    ("GET", "/v1/queues/{queue}/tasks"): ("read_messages", "global"),
    ("POST", "/v1/queues/{queue}/tasks/batch"): ("publish", "global"),
    ("GET", "/v1/tasks"): ("read_messages", "global"),
    ("GET", "/v1/tasks/{task_id}"): ("read_messages", "task"),
    ("GET", "/v1/tasks/{task_id}/attempts"): ("read_messages", "task"),
    ("POST", "/v1/tasks/{task_id}/cancel"): ("write", "task"),
    ("POST", "/v1/tasks/{task_id}/retry"): ("write", "task"),
    ("DELETE", "/v1/tasks/{task_id}"): ("write", "task"),
    ("GET", "/v1/queues"): ("read", "global"),
    ("GET", "/v1/queues/{queue}"): ("read", "global"),
    ("PUT", "/v1/queues/{queue}"): ("write", "global"),
    ("PATCH", "/v1/queues/{queue}"): ("write", "global"),
    ("DELETE", "/v1/queues/{queue}"): ("write", "global"),
    ("GET", "/v1/queues/{queue}/public-key"): ("read", "global"),
    ("POST", "/v1/queues/{queue}/pause"): ("write", "global"),
    ("POST", "/v1/queues/{queue}/resume"): ("write", "global"),
    ("POST", "/v1/queues/{queue}/purge"): ("write", "global"),
    ("POST", "/v1/endpoints"): ("write", "create"),
    ("GET", "/v1/endpoints"): ("read", "list"),
    ("GET", "/v1/endpoints/{endpoint_id}"): ("read", "endpoint"),
    ("PATCH", "/v1/endpoints/{endpoint_id}"): ("write", "endpoint"),
    ("DELETE", "/v1/endpoints/{endpoint_id}"): ("write", "endpoint"),
    ("GET", "/v1/endpoints/{endpoint_id}/secret"): ("read_secret", "endpoint"),
    ("GET", "/v1/endpoints/{endpoint_id}/public-key"): ("read", "endpoint"),
    ("POST", "/v1/endpoints/{endpoint_id}/enable"): ("write", "endpoint"),
    ("POST", "/v1/endpoints/{endpoint_id}/disable"): ("write", "endpoint"),
    ("POST", "/v1/endpoints/{endpoint_id}/recover"): ("write", "endpoint"),
    ("GET", "/v1/endpoints/{endpoint_id}/tasks"): ("read_messages", "endpoint"),
    ("POST", "/v1/endpoints/{endpoint_id}/replay"): ("write", "endpoint"),
    ("POST", "/v1/endpoints/{endpoint_id}/test"): ("write", "endpoint"),
    ("PUT", "/v1/event-types/{event_type}"): ("write", "catalogue"),
    ("PATCH", "/v1/event-types/{event_type}"): ("write", "catalogue"),
    ("DELETE", "/v1/event-types/{event_type}"): ("write", "catalogue"),
    ("GET", "/v1/event-types/{event_type}"): ("read", "catalogue"),
    ("GET", "/v1/event-types"): ("read", "catalogue"),
    ("POST", "/v1/events"): ("publish", "create"),
    ("GET", "/v1/events"): ("read_messages", "list"),
    ("GET", "/v1/events/{event_id}"): ("read_messages", "event"),
    ("DELETE", "/v1/events/{event_id}"): ("write", "event"),
    ("POST", "/v1/operations"): ("write", "global"),
    ("GET", "/v1/operations"): ("read", "global"),
    ("GET", "/v1/operations/{operation_id}"): ("read", "global"),
    ("POST", "/v1/schedules"): ("write", "global"),
    ("GET", "/v1/schedules"): ("read", "global"),
    ("GET", "/v1/schedules/{schedule_id}"): ("read", "global"),
    ("PATCH", "/v1/schedules/{schedule_id}"): ("write", "global"),
    ("DELETE", "/v1/schedules/{schedule_id}"): ("write", "global"),
    ("POST", "/v1/schedules/{schedule_id}/pause"): ("write", "global"),
    ("POST", "/v1/schedules/{schedule_id}/resume"): ("write", "global"),
    ("POST", "/v1/schedules/{schedule_id}/trigger"): ("write", "global"),
    ("PUT", "/v1/tenants/{tenant}"): ("write", "own-record"),
    ("PATCH", "/v1/tenants/{tenant}"): ("write", "own-record"),
    ("DELETE", "/v1/tenants/{tenant}"): ("write", "own-record"),
    ("GET", "/v1/tenants/{tenant}"): ("read", "tenant"),
    ("GET", "/v1/tenants/{tenant}/export"): ("read", "tenant"),
    ("GET", "/v1/tenants"): ("read", "list"),
    ("POST", "/v1/keys"): ("manage_access", "global"),
    ("GET", "/v1/keys"): ("manage_access", "global"),
    ("GET", "/v1/keys/{key_id}"): ("manage_access", "global"),
    ("DELETE", "/v1/keys/{key_id}"): ("manage_access", "global"),
    ("GET", "/v1/audit"): ("manage_access", "global"),
    ("GET", "/health/live"): ("nothing", "list"),
    ("GET", "/health/ready"): ("nothing", "list"),
    ("GET", "/metrics"): ("read", "global"),
}
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/queues/{queue}/tasks"): {"url": HOOK},
    ("POST", "/v1/queues/{queue}/tasks/batch"): {"tasks": [{"url": HOOK}]},
    ("PUT", "/v1/queues/{queue}"): {},
    ("PATCH", "/v1/queues/{queue}"): {"max_attempts": 3},
    ("POST", "/v1/endpoints"): {"url": HOOK},
    ("PATCH", "/v1/endpoints/{endpoint_id}"): {"description": "changed"},
    ("POST", "/v1/endpoints/{endpoint_id}/recover"): {"since": "2020-01-01T00:00:00Z"},
    ("POST", "/v1/endpoints/{endpoint_id}/replay"): {"since": "2020-01-01T00:00:00Z"},
    ("PUT", "/v1/event-types/{event_type}"): {"description": "changed"},
    ("PATCH", "/v1/event-types/{event_type}"): {"description": "changed"},
    ("POST", "/v1/events"): {"type": "invoice.paid", "payload": {"n": 1}},
    ("POST", "/v1/operations"): {"action": "cancel", "filter": {"queue": "q"}},
    ("POST", "/v1/schedules"): {"cron": "0 0 * * *", "task": {"url": HOOK}},
    ("PATCH", "/v1/schedules/{schedule_id}"): {"name": "changed"},
    ("PUT", "/v1/tenants/{tenant}"): {"name": "changed"},
    ("PATCH", "/v1/tenants/{tenant}"): {"name": "changed"},
    ("POST", "/v1/keys"): {"name": "made", "role": "reader"},
}
OTHER = "globex"  # the tenant the scoped keys are not of


def _routes() -> list[tuple[str, str]]:
    app: Any = create_app(Service(Settings(database_url="sqlite:///unused.db", signing_secret=TEST_SECRET)),
                          anonymous=True)  # fmt: skip
    while not hasattr(app, "openapi"):  # the FastAPI app beneath the guards
        app = getattr(app, "_app", None) or app.app
    return [(method.upper(), path) for path, ops in app.openapi()["paths"].items() for method in ops]


ROUTES = _routes()


def test_every_route_is_in_the_matrix() -> None:
    assert set(ROUTES) == set(RULES), "classify the new route in RULES (and BODIES if it takes one)"


@dataclass
class World:
    """One of each object, for tenant acme (own) and globex (other), and the keys."""

    http: httpx.AsyncClient
    ids: dict[str, str]
    keys: dict[tuple[str, str | None], str]


async def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code < 300, response.text
    found: dict[str, Any] = response.json()
    return found


async def build(http: httpx.AsyncClient) -> dict[str, str]:
    ids: dict[str, str] = {}
    await _ok(await http.put("/v1/event-types/invoice.paid", json={"examples": [{"n": 1}]}))
    for tenant in ("acme", OTHER):
        private, _ = generate_key_pair()
        endpoint = await _ok(await http.post("/v1/endpoints", json={"url": HOOK, "tenant": tenant,
                                                                    "signing_secret": private}))  # fmt: skip
        event = await _ok(
            await http.post("/v1/events", json={"type": "invoice.paid", "payload": {}, "tenant": tenant})
        )
        ids[f"endpoint:{tenant}"] = endpoint["id"]
        ids[f"event:{tenant}"] = event["id"]
        ids[f"task:{tenant}"] = event["deliveries"][0]["task_id"]
    await http.put("/v1/queues/q", json={"signing_secret": generate_key_pair()[0]})
    ids["task:plain"] = (await _ok(await http.post("/v1/queues/q/tasks", json={"url": HOOK})))["id"]
    schedule = await _ok(await http.post("/v1/schedules", json={"cron": "0 0 * * *", "task": {"url": HOOK}}))
    ids["schedule"] = schedule["id"]
    operation = await _ok(
        await http.post("/v1/operations", json={"action": "retry", "filter": {"queue": "q"}})
    )
    ids["operation"] = operation["id"]
    ids["key"] = (await _ok(await http.post("/v1/keys", json={"name": "target", "role": "reader"})))["id"]
    return ids


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[World]:
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=TEST_TOKEN
    )
    async with in_process(settings, headers=AUTH) as (_, http):
        keys = {}
        for role in GRANTS:
            for tenant in (None, "acme"):
                made = await _ok(
                    await http.post("/v1/keys", json={"name": f"{role}", "role": role, "tenant": tenant})
                )
                keys[(role, tenant)] = made["key"]
        yield World(http, await build(http), keys)


def fill(template: str, ids: dict[str, str], whose: str) -> str:
    """The route's path with its parameters filled: tenant-owned objects of ``whose``."""
    owner = "acme" if whose == "plain" else whose
    values = {
        "{queue}": lambda: "q",
        "{name}": lambda: "q",  # the dashboard's queue pages
        "{endpoint_id}": lambda: ids[f"endpoint:{owner}"],
        "{event_id}": lambda: ids[f"event:{owner}"],
        "{task_id}": lambda: ids[f"task:{whose}"],
        "{tenant}": lambda: owner,
        "{tenant:path}": lambda: owner,
        "{schedule_id}": lambda: ids["schedule"],
        "{operation_id}": lambda: ids["operation"],
        "{key_id}": lambda: ids["key"],
        "{event_type}": lambda: "invoice.paid",
    }
    for placeholder, value in values.items():
        if placeholder in template:
            template = template.replace(placeholder, value())
    return template


def expected(role: str, tenant: str | None, needs: Needs, addresses: Addresses, whose: str) -> int | str:
    """403, 404, or "allowed" (any answer but 401, 403 and 404)."""
    lacks = needs not in GRANTS[role]
    if addresses == "catalogue":
        return 403 if lacks or (tenant is not None and needs == "write") else "allowed"
    if tenant is not None:
        if addresses == "global" or (addresses not in ("list", "create") and whose != tenant):
            return 404
        if addresses == "own-record":
            return 403  # a tenant key reads its tenant's record, never changes it
    return 403 if lacks else "allowed"


async def _others(world: World) -> list[Any]:
    """The other tenant's endpoint, event and delivery, as an admin reads them."""
    ids = world.ids
    paths = (f"/v1/endpoints/{ids['endpoint:' + OTHER]}", f"/v1/events/{ids['event:' + OTHER]}",
             f"/v1/tasks/{ids['task:' + OTHER]}")  # fmt: skip
    return [(await world.http.get(path)).json() for path in paths]


@pytest.mark.parametrize(("method", "template"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
async def test_each_cell_answers_as_the_design_says(world: World, method: str, template: str) -> None:
    needs, addresses = RULES[(method, template)]
    owned = addresses in ("endpoint", "event", "task", "tenant", "own-record")
    variants = ["acme", OTHER] if owned else ["plain" if addresses == "global" else "acme"]
    cells = [(role, tenant, whose) for tenant in ("acme", None) for role in GRANTS for whose in variants]
    for role, tenant, whose in cells:
        if method == "DELETE" or template.endswith("/purge"):
            world.ids = await build(world.http)  # a fresh object for each cell that may delete it
        before = await _others(world)
        path = fill(template, world.ids, whose)
        headers = {"authorization": f"Bearer {world.keys[(role, tenant)]}"}
        response = await world.http.request(
            method, path, json=BODIES.get((method, template)), headers=headers
        )
        want = expected(role, tenant, needs, addresses, whose)
        answer = f"{response.status_code} {response.text[:300]}"
        cell = f"{role} key, tenant {tenant}, {whose}'s object: {method} {path} → {answer}"
        if want == "allowed":
            assert response.status_code not in (401, 403, 404), cell
        else:
            assert response.status_code == want, cell
            assert response.headers["content-type"] == "application/problem+json", cell
        if tenant is not None:
            assert await _others(world) == before, f"the other tenant's objects changed: {cell}"
            # Nothing of the other tenant in the answer but what the request itself named.
            other = [OTHER, *(world.ids[f"{kind}:{OTHER}"] for kind in ("endpoint", "event", "task"))]
            assert not any(found in response.text for found in other if found not in path), cell
