"""The dashboard's event catalogue and an endpoint's routing buttons (test event, replay,
filter) in-process, on both backends: what they show, escaping, what the buttons change, the
guards in front of them and what they refuse. The dispatcher is off (nothing is sent, the
replay's operation waits)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.servers import AUTH
from tests.ui.helpers import (
    ESCAPED,
    FOREIGN_ORIGINS,
    HOOK,
    SCRIPT,
    assert_refused_as_foreign,
    log_in,
    origin,
    row,
)


async def api(http: httpx.AsyncClient, method: str, path: str, body: Any = None) -> Any:
    response = await http.request(method, path, json=body, headers=AUTH)
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


async def test_the_catalogue_lists_types_and_shows_one_with_its_schema_escaped(
    http: httpx.AsyncClient,
) -> None:
    schema = {"type": "object", "description": SCRIPT}
    await api(http, "PUT", "/v1/event-types/invoice.paid", {"description": SCRIPT, "schema": schema,
                                                             "examples": [{"note": SCRIPT}]})  # fmt: skip
    await api(http, "PUT", "/v1/event-types/old.thing", {"deprecated": True})
    await log_in(http)
    listed = (await http.get("/ui/event-types")).text
    assert "old.thing" not in listed and ESCAPED in row(listed, "data-type", "invoice.paid")
    assert SCRIPT not in listed
    everything = (await http.get("/ui/event-types", params={"deprecated": "shown"})).text
    assert "deprecated" in row(everything, "data-type", "old.thing")
    page = await http.get("/ui/event-types/invoice.paid")
    assert page.status_code == 200 and SCRIPT not in page.text
    assert '"type": "object"' in page.text.replace("&#34;", '"') and ESCAPED in page.text
    assert (await http.get("/ui/event-types/never.declared")).status_code == 404
    assert (await http.get("/ui/event-types/not a type")).status_code == 404
    empty = await http.delete("/v1/event-types/invoice.paid", headers=AUTH)
    assert empty.status_code == 204
    await http.delete("/v1/event-types/old.thing", headers=AUTH)
    assert "No event types yet" in (await http.get("/ui/event-types")).text


async def test_the_endpoint_page_sends_a_test_event_of_a_catalogue_type(http: httpx.AsyncClient) -> None:
    await api(http, "PUT", "/v1/event-types/invoice.paid", {"examples": [{"id": "in_1"}]})
    endpoint = await api(http, "POST", "/v1/endpoints", {"url": HOOK, "payload_format": "envelope"})
    await log_in(http)
    page = (await http.get(f"/ui/endpoints/{endpoint['id']}")).text
    assert 'value="invoice.paid"' in page and "envelope" in page
    sent = await http.post(
        f"/ui/endpoints/{endpoint['id']}/test", data={"event_type": "invoice.paid"}, headers=origin(http)
    )
    assert sent.status_code == 303 and sent.headers["location"].endswith("?done=tested")
    [task] = (await api(http, "GET", f"/v1/endpoints/{endpoint['id']}/tasks"))["tasks"]
    assert task["test"] is True and task["body"]["data"] == {"id": "in_1"}
    shown = (await http.get(sent.headers["location"])).text
    assert "A test event is on its way" in shown
    unknown = await http.post(
        f"/ui/endpoints/{endpoint['id']}/test", data={"event_type": "never.declared"}, headers=origin(http)
    )
    assert unknown.status_code == 422 and "not in the catalogue" in unknown.text
    await api(http, "POST", f"/v1/endpoints/{endpoint['id']}/disable")
    disabled = await http.post(f"/ui/endpoints/{endpoint['id']}/test", headers=origin(http))
    assert disabled.status_code == 409 and "enable it first" in disabled.text
    assert len((await api(http, "GET", f"/v1/endpoints/{endpoint['id']}/tasks"))["tasks"]) == 1


async def test_the_endpoint_page_saves_a_filter_and_refuses_a_malformed_one(http: httpx.AsyncClient) -> None:
    endpoint = await api(http, "POST", "/v1/endpoints", {"url": HOOK})
    await log_in(http)
    path = f"/ui/endpoints/{endpoint['id']}/filter"
    given = {"labels.region": "eu", "payload.amount": {"$gte": 1.5}}
    saved = await http.post(path, data={"filter_json": json.dumps(given)}, headers=origin(http))
    assert saved.status_code == 303 and saved.headers["location"].endswith("?done=filtered")
    assert (await api(http, "GET", f"/v1/endpoints/{endpoint['id']}"))["filter"] == given
    page = (await http.get(f"/ui/endpoints/{endpoint['id']}")).text
    assert "labels.region" in page.replace("&#34;", '"')
    for bad in ('{"payload.a": {"$foo": 1}}', "{not json", '["a"]', json.dumps({"payload.a": SCRIPT * 300})):
        refused = await http.post(path, data={"filter_json": bad}, headers=origin(http))
        assert refused.status_code == 422, bad
        assert SCRIPT not in refused.text
    assert (await api(http, "GET", f"/v1/endpoints/{endpoint['id']}"))["filter"] == given
    cleared = await http.post(path, data={"filter_json": ""}, headers=origin(http))
    assert cleared.status_code == 303
    assert (await api(http, "GET", f"/v1/endpoints/{endpoint['id']}"))["filter"] is None


async def test_the_endpoint_page_starts_a_replay(http: httpx.AsyncClient) -> None:
    endpoint = await api(http, "POST", "/v1/endpoints", {"url": HOOK})
    await log_in(http)
    started = await http.post(
        f"/ui/endpoints/{endpoint['id']}/replay", data={"window": "3d"}, headers=origin(http)
    )
    assert started.status_code == 303 and started.headers["location"].endswith("?done=replaying")
    [operation] = (await api(http, "GET", "/v1/operations"))["operations"]
    assert operation["action"] == "replay" and operation["filter"]["endpoint_id"] == endpoint["id"]
    running = await http.post(f"/ui/endpoints/{endpoint['id']}/replay", headers=origin(http))
    assert running.status_code == 409 and "being replayed already" in running.text  # no dispatcher here
    odd = await http.post(
        f"/ui/endpoints/{endpoint['id']}/replay", data={"window": "1y"}, headers=origin(http)
    )
    assert odd.status_code == 422
    gone = await http.post("/ui/endpoints/ep_gone/replay", headers=origin(http))
    assert gone.status_code == 404
    assert len((await api(http, "GET", "/v1/operations"))["operations"]) == 1


async def test_the_routing_buttons_refuse_a_post_from_elsewhere(http: httpx.AsyncClient) -> None:
    endpoint = await api(http, "POST", "/v1/endpoints", {"url": HOOK})
    await log_in(http)
    for button in ("test", "replay", "filter"):
        for headers in FOREIGN_ORIGINS:
            response = await http.post(f"/ui/endpoints/{endpoint['id']}/{button}", headers=headers)
            assert_refused_as_foreign(response, headers, f"{button} with {headers}")
    assert (await api(http, "GET", f"/v1/endpoints/{endpoint['id']}/tasks"))["tasks"] == []
    assert (await api(http, "GET", "/v1/operations"))["operations"] == []


async def test_a_filter_too_large_or_deep_for_the_form_changes_nothing(http: httpx.AsyncClient) -> None:
    given = {"$or": [{f"payload.k{n}": {"$in": [f"value-{n}-{m}" for m in range(11)]}} for n in range(44)]}
    endpoint = await api(http, "POST", "/v1/endpoints", {"url": HOOK, "filter": given})
    await log_in(http)
    path = f"/ui/endpoints/{endpoint['id']}/filter"
    page = (await http.get(f"/ui/endpoints/{endpoint['id']}")).text
    shown = page.split('name="filter_json"', 1)[1].split(">", 1)[1].split("</textarea>", 1)[0]
    as_typed = shown.replace("&#34;", '"').replace("&amp;", "&")
    posted = await http.post(path, data={"filter_json": as_typed}, headers=origin(http))
    assert posted.status_code == 303  # the page's own form, sent back as it was: saved as it was
    assert (await api(http, "GET", f"/v1/endpoints/{endpoint['id']}"))["filter"] == given
    huge = await http.post(path, data={"filter_json": "x" * 200_000}, headers=origin(http))
    assert huge.status_code == 413
    deep = await http.post(path, data={"filter_json": "[" * 3000}, headers=origin(http))
    assert deep.status_code == 422
    assert (await api(http, "GET", f"/v1/endpoints/{endpoint['id']}"))["filter"] == given
