"""The dashboard in the authorization matrix: every page and button of /ui, logged in with a
key of every role, with and without a tenant, on its own tenant's objects and another's, on
both backends. The expected answers are those of the API's matrix (the design's table,
tests/api/test_authorization_matrix.py), given as pages: 404 and 403 pages, a tenant's key
sent from the queue overview to its endpoints; a role that may not change anything sees no
button; a tenant's key sees nothing of the other tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.api.test_authorization_matrix import GRANTS, OTHER, Addresses, Needs, build, expected, fill
from tests.support.servers import AUTH, TEST_SECRET, TEST_TOKEN, in_process
from tests.ui.helpers import origin
from workly.config import Settings
from workly.ui import access_pages, catalogue_pages, operation_pages, pages, schedule_pages, webhook_pages

UI_RULES: dict[tuple[str, str], tuple[Needs, Addresses]] = {
    ("GET", "/ui"): ("read", "global"),
    ("GET", "/ui/queues/{name}"): ("read", "global"),
    ("GET", "/ui/tasks"): ("read", "global"),  # its filter lists the queues
    ("GET", "/ui/tasks/{task_id}"): ("read_messages", "task"),
    ("POST", "/ui/tasks/{task_id}/retry"): ("write", "task"),
    ("POST", "/ui/tasks/{task_id}/cancel"): ("write", "task"),
    ("POST", "/ui/queues/{queue}/pause"): ("write", "global"),
    ("POST", "/ui/queues/{queue}/resume"): ("write", "global"),
    ("GET", "/ui/endpoints"): ("read", "list"),
    ("GET", "/ui/endpoints/{endpoint_id}"): ("read", "endpoint"),
    ("POST", "/ui/endpoints/{endpoint_id}/enable"): ("write", "endpoint"),
    ("POST", "/ui/endpoints/{endpoint_id}/disable"): ("write", "endpoint"),
    ("GET", "/ui/events"): ("read_messages", "list"),
    ("GET", "/ui/events/{event_id}"): ("read_messages", "event"),
    ("GET", "/ui/operations"): ("read", "global"),
    ("GET", "/ui/operations/{operation_id}"): ("read", "global"),
    ("POST", "/ui/queues/{queue}/retry-failed"): ("write", "global"),
    ("POST", "/ui/endpoints/{endpoint_id}/retry-failed"): ("write", "global"),  # a bulk operation
    ("GET", "/ui/schedules"): ("read", "global"),
    ("GET", "/ui/schedules/{schedule_id}"): ("read", "global"),
    ("POST", "/ui/schedules/{schedule_id}/pause"): ("write", "global"),
    ("POST", "/ui/schedules/{schedule_id}/resume"): ("write", "global"),
    ("POST", "/ui/schedules/{schedule_id}/trigger"): ("write", "global"),
    ("POST", "/ui/schedules/{schedule_id}/delete"): ("write", "global"),
    ("GET", "/ui/tenants"): ("read", "list"),
    ("GET", "/ui/tenants/{tenant:path}"): ("read", "tenant"),
    ("GET", "/ui/tenants/{tenant:path}/export"): ("read", "tenant"),
    ("POST", "/ui/tenants/{tenant:path}/erase"): ("write", "own-record"),
    ("GET", "/ui/audit"): ("manage_access", "global"),
    ("GET", "/ui/event-types"): ("read", "catalogue"),
    ("GET", "/ui/event-types/{event_type}"): ("read", "catalogue"),
    ("POST", "/ui/endpoints/{endpoint_id}/test"): ("write", "endpoint"),
    ("POST", "/ui/endpoints/{endpoint_id}/replay"): ("write", "endpoint"),
    ("POST", "/ui/endpoints/{endpoint_id}/filter"): ("write", "endpoint"),
}
ROUTERS = (
    pages.pages,
    webhook_pages.router,
    operation_pages.router,
    schedule_pages.router,
    access_pages.router,
    catalogue_pages.router,
)
UI_ROUTES = [
    (method, route.path) for router in ROUTERS for route in router.routes for method in route.methods
]  # type: ignore[attr-defined]


def test_every_dashboard_route_is_in_the_matrix() -> None:
    assert set(UI_ROUTES) == set(UI_RULES), "classify the new dashboard route in UI_RULES"


@dataclass
class Dashboard:
    http: httpx.AsyncClient
    ids: dict[str, str]
    sessions: dict[tuple[str, str | None], str]


@pytest.fixture
async def dashboard(database_url: str) -> AsyncIterator[Dashboard]:
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=TEST_TOKEN
    )
    async with in_process(settings) as (_, http):
        sessions = {}
        for role in GRANTS:
            for tenant in (None, "acme"):
                made = await http.post(
                    "/v1/keys", json={"name": role, "role": role, "tenant": tenant}, headers=AUTH
                )
                login = await http.post("/ui/login", data={"token": made.json()["key"]}, headers=origin(http))
                assert login.status_code == 303, login.text
                sessions[(role, tenant)] = login.cookies["workly_session"]
                http.cookies.clear()
        http.headers.update(AUTH)
        ids = await build(http)
        del http.headers["authorization"]
        yield Dashboard(http, ids, sessions)


def _status_of(response: httpx.Response) -> int:
    """A refusal is a page with its status (an error page), never a redirect to log in."""
    assert not response.headers.get("location", "").startswith("/ui/login"), response.headers
    return response.status_code


@pytest.mark.parametrize(("method", "template"), UI_ROUTES, ids=[f"{m} {p}" for m, p in UI_ROUTES])
async def test_each_dashboard_cell_answers_as_the_design_says(
    dashboard: Dashboard, method: str, template: str
) -> None:
    needs, addresses = UI_RULES[(method, template)]
    owned = addresses in ("endpoint", "event", "task", "tenant", "own-record")
    variants = ["acme", OTHER] if owned else ["plain" if addresses == "global" else "acme"]
    http = dashboard.http
    for tenant in ("acme", None):
        for role in GRANTS:
            for whose in variants:
                if method == "POST":
                    http.headers.update(AUTH)
                    dashboard.ids = await build(http)  # fresh objects: a button may delete one
                    del http.headers["authorization"]
                path = fill(template, dashboard.ids, whose)
                headers: dict[str, Any] = {"cookie": f"workly_session={dashboard.sessions[(role, tenant)]}"}
                if method == "POST":
                    headers.update(origin(http))
                form = {"confirm": whose} if template.endswith("/erase") else None  # the tenant's id, typed
                response = await http.request(method, path, headers=headers, data=form)
                want = expected(role, tenant, needs, addresses, whose)
                cell = f"{role} key, tenant {tenant}, {whose}'s: {method} {path} → {response.status_code}"
                status = _status_of(response)
                if want == "allowed":
                    assert status in (200, 303), cell
                elif (method, template) == ("GET", "/ui") and (
                    tenant is not None or "read" not in GRANTS[role]
                ):
                    # Sent where it can look: a tenant's key to its endpoints, a publisher to events.
                    where = "/ui/endpoints" if "read" in GRANTS[role] else "/ui/events"
                    assert (status, response.headers["location"]) == (303, where), cell
                else:
                    assert status == want, f"{cell} {response.text[:300]}"
                page = response.headers.get("content-type", "").startswith("text/html")  # not JSON Lines
                if method == "GET" and status == 200 and page and not GRANTS[role] >= {"write"}:
                    forms = response.text.count('method="post"')
                    assert forms == 1, (
                        f"{cell}: a button beyond Log out for a key that may not change anything"
                    )
                if tenant is not None:
                    other = [
                        OTHER,
                        *(dashboard.ids[f"{kind}:{OTHER}"] for kind in ("endpoint", "event", "task")),
                    ]
                    assert not any(found in response.text for found in other if found not in path), cell


async def test_a_control_character_in_an_audit_filter_is_no_filter(dashboard: Dashboard) -> None:
    admin = {"cookie": f"workly_session={dashboard.sessions[('admin', None)]}"}
    for name in ("actor", "action", "tenant"):
        response = await dashboard.http.get("/ui/audit", params={name: "a\x00b"}, headers=admin)
        assert response.status_code == 200, response.text


async def test_a_tenant_with_a_slash_has_a_page(dashboard: Dashboard) -> None:
    made = await dashboard.http.put("/v1/tenants/a/b", json={"name": "slashed"}, headers=AUTH)
    assert made.status_code == 201, made.text
    admin = {"cookie": f"workly_session={dashboard.sessions[('admin', None)]}"}
    listed = await dashboard.http.get("/ui/tenants", headers=admin)
    assert 'href="/ui/tenants/a/b"' in listed.text or 'href="/ui/tenants/a%2Fb"' in listed.text
    page = await dashboard.http.get("/ui/tenants/a%2Fb", headers=admin)
    assert page.status_code == 200 and "slashed" in page.text
