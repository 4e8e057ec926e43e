"""The dashboard in-process (no browser, no socket): access, its buttons, what it refuses.

tests/e2e/test_dashboard.py drives the same pages in a real headless Chromium.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.servers import AUTH, TEST_TOKEN
from tests.ui.helpers import (
    ESCAPED,
    FOREIGN_ORIGINS,
    HOOK,
    SCRIPT,
    UNPARSABLE_ORIGIN,
    assert_refused_as_foreign,
    log_in,
    origin,
)
from workly.ui.access import safe_next


async def enqueue(http: httpx.AsyncClient, **fields: object) -> str:
    response = await http.post("/v1/queues/q/tasks", json={"url": HOOK, **fields}, headers=AUTH)
    assert response.status_code == 201, response.text
    task_id: str = response.json()["id"]
    return task_id


async def test_a_browser_without_a_session_goes_to_the_login_page(http: httpx.AsyncClient) -> None:
    for path, quoted in [
        ("/ui", "%2Fui"), ("/ui/tasks/task_x", "%2Fui%2Ftasks%2Ftask_x"),
        ("/ui/tasks?queue=q&status=failed", "%2Fui%2Ftasks%3Fqueue%3Dq%26status%3Dfailed"),
        ("/ui/", "%2Fui%2F"), ("/docs", "%2Fdocs"),
    ]:  # fmt: skip
        response = await http.get(path)
        assert (response.status_code, response.headers["location"]) == (303, f"/ui/login?next={quoted}")
    # A button pressed without a session is refused before its body is read, like the API.
    posted = await http.post("/ui/queues/q/pause", headers=origin(http), content=b"x" * 900_000)
    assert posted.status_code == 401
    assert (await http.get("/openapi.json")).status_code == 401
    assert (await http.get("/ui/login")).status_code == 200
    assert (await http.get("/ui/assets/workly.css")).status_code == 200


async def test_login_sets_a_strict_httponly_session_cookie_that_is_not_the_token(
    http: httpx.AsyncClient,
) -> None:
    wrong = await http.post("/ui/login", data={"token": "wrong"}, headers=origin(http))
    assert wrong.status_code == 401 and "not one of this server" in wrong.text
    assert "workly_session" not in http.cookies
    response = await http.post("/ui/login", data={"token": TEST_TOKEN}, headers=origin(http))
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("workly_session=") and TEST_TOKEN not in cookie
    attributes = {part.strip() for part in cookie.split(";")}
    assert {"HttpOnly", "Path=/", "SameSite=strict", "Max-Age=43200"} <= attributes
    assert (await http.get("/ui")).status_code == 200
    # The cookie opens the dashboard and the API reference, not the API.
    assert (await http.get("/v1/queues")).status_code == 401
    assert (await http.post("/v1/queues/q/tasks", json={"url": HOOK})).status_code == 401
    assert (await http.get("/docs")).status_code == 200
    schema = (await http.get("/openapi.json")).json()
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert schema["security"] == [{"bearer": []}]
    session = http.cookies["workly_session"]
    await http.post("/ui/logout", headers=origin(http))
    assert "workly_session" not in http.cookies  # the browser drops it
    assert (await http.get("/ui")).status_code == 303
    # Logging out ended the session server-side: a copy of the cookie opens nothing either.
    assert (await http.get("/ui", headers={"cookie": f"workly_session={session}"})).status_code == 303
    forged = session[:-1] + ("0" if session[-1] != "0" else "1")
    assert (await http.get("/ui", headers={"cookie": f"workly_session={forged}"})).status_code == 303
    docs = await http.get("/docs")
    assert (docs.status_code, docs.headers["location"]) == (303, "/ui/login?next=%2Fdocs")
    assert (await http.get("/openapi.json")).status_code == 401


async def test_a_bearer_token_also_opens_the_pages(http: httpx.AsyncClient) -> None:
    response = await http.get("/ui/tasks", headers=AUTH)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("headers", [*FOREIGN_ORIGINS, UNPARSABLE_ORIGIN])
async def test_buttons_refuse_posts_from_other_origins_and_change_nothing(
    http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    task_id = await enqueue(http)
    await log_in(http, then="/ui/tasks")
    for path in (f"/ui/tasks/{task_id}/cancel", "/ui/queues/q/pause"):
        assert_refused_as_foreign(await http.post(path, headers=headers), headers, path)
    assert (await http.get(f"/v1/tasks/{task_id}", headers=AUTH)).json()["status"] == "ready"
    assert (await http.get("/v1/queues/q", headers=AUTH)).json()["paused"] is False
    refused = await http.post("/ui/login", data={"token": TEST_TOKEN}, headers=headers)
    assert refused.status_code == 403


async def test_buttons_change_state_and_come_back_with_a_notice(http: httpx.AsyncClient) -> None:
    task_id = await enqueue(http)
    await log_in(http, then="/ui/tasks")
    canceled = await http.post(f"/ui/tasks/{task_id}/cancel", headers=origin(http))
    assert (canceled.status_code, canceled.headers["location"]) == (303, f"/ui/tasks/{task_id}?done=canceled")
    page = await http.get(canceled.headers["location"])
    assert "Canceled." in page.text and 'id="status">canceled<' in page.text
    retried = await http.post(f"/ui/tasks/{task_id}/retry", headers=origin(http))
    assert retried.status_code == 303
    assert (await http.get(f"/v1/tasks/{task_id}", headers=AUTH)).json()["status"] == "ready"
    again = await http.post(f"/ui/tasks/{task_id}/retry", headers=origin(http))  # ready: due now
    assert again.status_code == 303
    assert (await http.get(f"/v1/tasks/{task_id}", headers=AUTH)).json()["status"] == "ready"
    assert (await http.post("/ui/queues/q/pause", headers=origin(http))).headers[
        "location"
    ] == "/ui?done=paused"
    assert (await http.get("/v1/queues/q", headers=AUTH)).json()["paused"] is True
    assert (await http.post("/ui/queues/nope/pause", headers=origin(http))).status_code == 404


async def test_pages_escape_what_tasks_hold(http: httpx.AsyncClient) -> None:
    task_id = await enqueue(http, url=f"{HOOK}?q=%3Cx%3E", headers={"X-Note": SCRIPT}, body={"html": SCRIPT})
    page = (await http.get(f"/ui/tasks/{task_id}", headers=AUTH)).text
    assert SCRIPT not in page and ESCAPED in page
    listing = (await http.get("/ui/tasks", headers=AUTH)).text
    assert task_id in listing


async def test_unknown_task_and_bad_filters_answer_pages_not_crashes(http: httpx.AsyncClient) -> None:
    for path in ("/ui/tasks/task_nope", "/ui/tasks/%00", "/ui/tasks/" + "x" * 5000):
        missing = await http.get(path, headers=AUTH)
        assert missing.status_code == 404 and "There is no such task" in missing.text
        assert "x" * 100 not in missing.text  # the id is not echoed back
    for path in (
        "/ui/tasks/%00/retry",
        "/ui/tasks/%00/cancel",
        "/ui/queues/%00/pause",
        "/ui/queues/a%00b/resume",
    ):
        response = await http.post(path, headers={**AUTH, **origin(http)})
        assert response.status_code == 404 and response.headers["content-type"].startswith("text/html"), path
    broken = await http.get("/ui/tasks", params={"cursor": "garbage!"}, headers=AUTH)
    assert broken.status_code == 400
    # Unknown, empty or overlong filters list everything rather than failing.
    for params in (
        {"queue": "gone", "status": "x"},
        {"queue": "q" * 500, "status": "s" * 500},
        {"queue": ""},
    ):
        listed = await http.get("/ui/tasks", params=params, headers=AUTH)
        assert listed.status_code == 200 and listed.headers["content-type"].startswith("text/html")


async def test_a_login_form_is_read_only_up_to_a_forms_size(http: httpx.AsyncClient) -> None:
    headers = {**origin(http), "content-type": "application/x-www-form-urlencoded"}
    response = await http.post("/ui/login", content=b"token=" + b"x" * 9000, headers=headers)
    assert response.status_code == 413

    async def chunks() -> AsyncIterator[bytes]:
        yield b"token=abc"  # no Content-Length: refused without reading

    assert (await http.post("/ui/login", content=chunks(), headers=headers)).status_code == 413


async def test_a_login_form_with_extra_fields_is_400_not_500(http: httpx.AsyncClient) -> None:
    body = "token=x&next=%2Fui&a=1&b=2&c=3&d=4"
    headers = {**origin(http), "content-type": "application/x-www-form-urlencoded"}
    response = await http.post("/ui/login", content=body, headers=headers)
    assert response.status_code == 400 and "workly_session" not in response.headers.get("set-cookie", "")


async def test_the_api_reference_is_served_by_the_server_alone_under_a_strict_policy(
    http: httpx.AsyncClient,
) -> None:
    page = await http.get("/docs", headers=AUTH)
    assert page.status_code == 200
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    assert scripts == ["/docs/assets/swagger-ui-bundle.js", "/docs/swagger-init.js"]
    assert re.search(r'<link rel="stylesheet" href="/docs/assets/swagger-ui.css">', page.text)
    assert "http" not in page.text.split("<body>")[1]  # nothing from elsewhere
    policy = page.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "'unsafe-eval'" not in policy and "https:" not in policy
    assert "<script>" not in page.text  # no inline script: the policy allows none
    for name, kind, inside in (("swagger-ui-bundle.js", "text/javascript", b"SwaggerUIBundle"),
                               ("swagger-ui.css", "text/css", b".swagger-ui")):  # fmt: skip
        asset = await http.get(f"/docs/assets/{name}", headers=AUTH)
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
        assert inside in asset.content
    assert (await http.get("/docs/assets/swagger-ui.css")).status_code == 401  # behind the same auth
    missing = await http.get("/docs/assets/../../../etc/passwd", headers=AUTH)
    assert missing.status_code == 404
    assert (await http.get("/docs/assets/index.css", headers=AUTH)).status_code == 404  # only the two files
    init = await http.get("/docs/swagger-init.js", headers=AUTH)
    assert init.status_code == 200 and 'url: "/openapi.json"' in init.text
    assert (await http.get("/redoc", headers=AUTH)).status_code == 404  # FastAPI's CDN page is off


@pytest.mark.parametrize(
    ("wanted", "goes_to"),
    [("/ui/tasks", "/ui/tasks"), ("/ui/tasks?queue=q", "/ui/tasks?queue=q"), ("/docs", "/docs"),
     ("/docs/../v1", "/ui"), ("https://evil.example/", "/ui"),
     ("//evil.example/ui", "/ui"), ("/v1/queues", "/ui"), (None, "/ui"), ("/ui\\@evil", "/ui")],
)  # fmt: skip
def test_login_only_returns_to_dashboard_pages(wanted: str | None, goes_to: str) -> None:
    assert safe_next(wanted) == goes_to
