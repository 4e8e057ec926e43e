"""A tenant's page: its export, downloaded, and its erasure, which asks for the tenant's id
typed again (in-process, on both backends; the dispatcher is off, so the erase operation
waits for a runner: the page of the operation it leads to shows it)."""

from __future__ import annotations

import json

import httpx

from tests.support.servers import AUTH
from tests.ui.helpers import FOREIGN_ORIGINS, HOOK, assert_refused_as_foreign, log_in, origin


async def acme(http: httpx.AsyncClient) -> str:
    made = await http.post("/v1/endpoints", json={"url": HOOK, "tenant": "acme"}, headers=AUTH)
    assert made.status_code == 201, made.text
    event = await http.post(
        "/v1/events", json={"type": "a.b", "tenant": "acme", "payload": {"n": 1}}, headers=AUTH
    )
    assert event.status_code == 201, event.text
    found: str = event.json()["id"]
    return found


async def test_the_export_link_downloads_the_tenants_json_lines(http: httpx.AsyncClient) -> None:
    event_id = await acme(http)
    await log_in(http)
    page = await http.get("/ui/tenants/acme")
    assert 'href="/ui/tenants/acme/export"' in page.text
    export = await http.get("/ui/tenants/acme/export")
    assert export.status_code == 200 and export.headers["content-type"] == "application/jsonl"
    assert "attachment" in export.headers["content-disposition"]
    kinds = [json.loads(line)["kind"] for line in export.text.splitlines()]
    assert kinds == ["endpoint", "event", "task"] and event_id in export.text
    assert (await http.get("/ui/tenants/nobody/export")).status_code == 404


async def test_erasing_asks_for_the_id_typed_again(http: httpx.AsyncClient) -> None:
    await acme(http)
    await log_in(http)
    page = await http.get("/ui/tenants/acme")
    assert 'action="/ui/tenants/acme/erase"' in page.text and 'name="confirm"' in page.text
    for typed in ("", "acm", "ACME", "acme "):
        refused = await http.post("/ui/tenants/acme/erase", data={"confirm": typed}, headers=origin(http))
        assert refused.status_code == 422 and "Nothing was erased" in refused.text
    operations = await http.get("/v1/operations", headers=AUTH)
    assert operations.json()["operations"] == []
    done = await http.post("/ui/tenants/acme/erase", data={"confirm": "acme"}, headers=origin(http))
    assert done.status_code == 303 and done.headers["location"].startswith("/ui/operations/op_")
    shown = await http.get(done.headers["location"])
    assert shown.status_code == 200 and "erase" in shown.text
    gone = await http.post("/ui/tenants/nobody/erase", data={"confirm": "nobody"}, headers=origin(http))
    assert gone.status_code == 404


async def test_the_erase_button_refuses_a_foreign_origin(http: httpx.AsyncClient) -> None:
    await acme(http)
    await log_in(http)
    for headers in FOREIGN_ORIGINS:
        response = await http.post("/ui/tenants/acme/erase", data={"confirm": "acme"}, headers=headers)
        assert_refused_as_foreign(response, headers, "erase")
    assert (await http.get("/v1/operations", headers=AUTH)).json()["operations"] == []
