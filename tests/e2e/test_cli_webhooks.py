"""The webhook platform's client commands (endpoints, events), run in-process (tests/e2e/cli.py)
against `workly dev`'s app with API tokens required: one server for the module, which every
test finds without endpoints, as a server of its own would be (``e2e``); the test that
lists every event has a server of its own, and bad input is run with no server at all. One
test runs the real `python -m workly`."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tests.e2e.cli import InProcessServer, Run, offline, real_workly, workly
from tests.e2e.conftest import E2E, wait_for_status
from tests.support.receiver import _verify

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


@pytest.fixture
async def e2e(e2e: E2E) -> E2E:
    """conftest's ``e2e`` on the module's server, with no endpoint on it: the tests list, and
    publish to, every endpoint, so each starts with none (those of the tests before it deleted,
    through the API)."""
    while found := (await e2e.client.get("/v1/endpoints", params={"limit": 100})).json()["endpoints"]:
        for endpoint in found:
            assert (await e2e.client.delete(f"/v1/endpoints/{endpoint['id']}")).is_success
    return e2e


def ok(run: Run) -> Run:
    assert run.code == 0 and not run.err, run
    return run


async def create(e2e: E2E, path: str, *args: str) -> dict[str, Any]:
    """`workly endpoint-create <receiver path> <args> --json`: the endpoint with its secret."""
    created: dict[str, Any] = ok(
        await workly(e2e, "endpoint-create", e2e.receiver.url(path), *args, "--json")
    ).json()
    return created


def rows(run: Run) -> list[list[str]]:
    """A table's rows (the header left out), each split on whitespace."""
    return [line.split() for line in ok(run).out.splitlines()[1:]]


def rows_after(out: str, header: str) -> list[list[str]]:
    """The rows of the table whose header line starts with ``header``, split on whitespace."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    return [line.split() for line in lines[start + 1 :] if line.strip()]


async def test_create_endpoints_publish_and_follow_the_deliveries(fresh_e2e: E2E, tmp_path: Path) -> None:
    e2e = fresh_e2e  # every event on the server is listed: only this test's may be there
    billing_args = ["--events", "invoice.*", "--header", "X-Source: cli", "--description", "billing service"]
    billing = await create(e2e, "/billing", *billing_args)
    paid_args = ["--events", "invoice.paid", "--events", "order.created"]
    text = ok(await workly(e2e, "endpoint-create", e2e.receiver.url("/paid"), *paid_args))
    first, second = text.out.splitlines()
    paid_id = first.split()[0]
    assert first == f"{paid_id} created: POST {e2e.receiver.url('/paid')} for invoice.paid,order.created"
    assert second.startswith("signing secret whsec_")
    shipping = await create(e2e, "/shipping", "--events", "order.shipped", "--tenant", "acme")

    assert billing["id"].startswith("ep_") and billing["signing_secret"].startswith("whsec_")
    assert (billing["event_types"], billing["headers"], billing["description"]) == (
        ["invoice.*"], {"X-Source": "cli"}, "billing service",
    )  # fmt: skip
    assert (billing["enabled"], billing["health"]["state"], billing["tenant"]) == (True, "healthy", None)
    assert (shipping["tenant"], shipping["event_types"]) == ("acme", ["order.shipped"])
    paid = ok(await workly(e2e, "endpoint", paid_id, "--secret", "--json")).json()
    assert paid["signing_secret"] == second.removeprefix("signing secret ")  # the one printed at creation
    assert "signing_secret" not in ok(await workly(e2e, "endpoint", paid_id, "--json")).json()
    secrets = {billing["id"]: billing["signing_secret"], paid_id: paid["signing_secret"]}

    publish = ["publish", "invoice.paid", "--data", '{"invoice": 7}', "--key", "cust-1", "--json"]
    published = ok(await workly(e2e, *publish)).json()
    event_id = published["id"]
    assert event_id.startswith("evt_") and (published["type"], published["key"]) == ("invoice.paid", "cust-1")
    deliveries = {d["endpoint_id"]: d["task_id"] for d in published["deliveries"]}
    assert set(deliveries) == {billing["id"], paid_id}  # not shipping: another type and tenant

    # Each subscribed receiver gets the payload, with webhook-id the event id, signed with the
    # secret that `workly endpoint-create` printed for it.
    for endpoint_id, path in [(billing["id"], "/billing"), (paid_id, "/paid")]:
        [received] = await e2e.receiver.wait_for(path, 1)
        assert json.loads(received.body) == {"invoice": 7} and received.headers["webhook-id"] == event_id
        assert _verify(secrets[endpoint_id], received.body, received.headers)
        await wait_for_status(e2e.client, deliveries[endpoint_id], "succeeded")
    assert e2e.receiver.at("/billing")[0].headers["X-Source"] == "cli"

    shown = ok(await workly(e2e, "event", event_id))
    assert f"id               {event_id}" in shown.out and 'payload          {"invoice":7}' in shown.out
    assert "key              cust-1" in shown.out
    assert sorted(rows_after(shown.out, "ENDPOINT")) == sorted(
        [endpoint_id, task_id, "succeeded", "1"] for endpoint_id, task_id in deliveries.items()
    )
    detail = ok(await workly(e2e, "event", event_id, "--json")).json()
    assert {(d["task_id"], d["status"], d["attempts"]) for d in detail["deliveries"]} == {
        (task_id, "succeeded", 1) for task_id in deliveries.values()
    }

    # The endpoints with their health: newest first; the two that were delivered to have a last success.
    listed = rows(await workly(e2e, "endpoints"))
    assert [row[0] for row in listed] == [shipping["id"], paid_id, billing["id"]]
    assert listed[2][:6] == [billing["id"], "healthy", e2e.receiver.url("/billing"), "invoice.*", "-", "0"]
    assert listed[2][6] != "-" and listed[0][3:7] == ["order.shipped", "acme", "0", "-"]
    page = ok(await workly(e2e, "endpoints", "--limit", "2", "--json")).json()
    assert [e["id"] for e in page["endpoints"]] == [shipping["id"], paid_id] and page["next_cursor"]
    rest = ok(
        await workly(e2e, "endpoints", "--limit", "2", "--cursor", page["next_cursor"], "--json")
    ).json()
    assert [e["id"] for e in rest["endpoints"]] == [billing["id"]] and rest["next_cursor"] is None
    assert [row[0] for row in rows(await workly(e2e, "endpoints", "--tenant", "acme"))] == [shipping["id"]]

    full = ok(await workly(e2e, "endpoint", billing["id"])).out
    assert "state            healthy" in full and "headers          X-Source: cli" in full
    assert "description      billing service" in full and "whsec_" not in full
    with_secret = ok(await workly(e2e, "endpoint", billing["id"], "--secret")).out
    assert with_secret.splitlines()[-1] == f"signing secret   {billing['signing_secret']}"

    # Publishing in text, from a file, with an idempotency key: the second time returns the first event.
    payload = tmp_path / "payload.json"
    payload.write_text('{"invoice": 8}')
    once = ok(
        await workly(e2e, "publish", "invoice.paid", "--data", f"@{payload}", "--idempotency-key", "k-8")
    )
    head = once.out.splitlines()[0]
    second_id = head.split()[0]
    assert head == f"{second_id} published: invoice.paid to 2 endpoints"
    assert sorted(row[0] for row in rows_after(once.out, "ENDPOINT")) == sorted(deliveries)
    again = ok(await workly(e2e, "publish", "invoice.paid", "--data", "{}", "--idempotency-key", "k-8"))
    assert again.out.splitlines()[0] == (
        f"{second_id} was published before (same idempotency key): invoice.paid to 2 endpoints"
    )
    nobody = ok(await workly(e2e, "publish", "user.created", "--data", "1"))
    assert nobody.out.strip().endswith(
        "published: user.created, to no endpoint (none enabled subscribes to it)"
    )

    # The events: newest first, filtered by type and tenant, each with how its deliveries stand.
    events = ok(await workly(e2e, "events", "--type", "invoice.paid", "--json")).json()
    assert [e["id"] for e in events["events"]] == [second_id, event_id] and events["next_cursor"] is None
    table = ok(await workly(e2e, "events", "--type", "invoice.paid"))
    assert table.out.splitlines()[0].split() == ["ID", "TYPE", "TENANT", "CREATED", "DELIVERIES"]
    [_, [event_id_, kind, tenant, _, _, *delivered]] = rows(table)
    assert (event_id_, kind, tenant, delivered) == (event_id, "invoice.paid", "-", ["2", "succeeded"])
    assert ok(await workly(e2e, "events", "--tenant", "acme")).out.strip() == "no events"
    one = ok(await workly(e2e, "events", "--type", "invoice.paid", "--limit", "1")).out.splitlines()
    assert one[1].split()[0] == second_id and one[-1].startswith("more: --cursor ")
    assert e2e.receiver.at("/shipping") == []


async def test_disable_enable_and_delete_an_endpoint(e2e: E2E) -> None:
    endpoint = await create(e2e, "/hook", "--events", "invoice.*")
    endpoint_id = endpoint["id"]

    disabled = ok(await workly(e2e, "endpoint-disable", endpoint_id))
    assert disabled.out.strip() == f"{endpoint_id} disabled (state disabled)"
    shown = ok(await workly(e2e, "endpoint", endpoint_id, "--json")).json()
    assert shown["enabled"] is False and shown["health"]["state"] == "disabled"
    assert shown["health"]["disabled_reason"]
    assert [row[1] for row in rows(await workly(e2e, "endpoints"))] == ["disabled"]
    skipped = ok(await workly(e2e, "publish", "invoice.paid", "--data", "{}", "--json")).json()
    assert skipped["deliveries"] == []  # a disabled endpoint gets no new events

    enabled = ok(await workly(e2e, "endpoint-enable", endpoint_id, "--json")).json()
    assert enabled["enabled"] is True and enabled["health"]["state"] == "healthy"
    delivered = ok(await workly(e2e, "publish", "invoice.paid", "--data", '{"n": 2}', "--json")).json()
    assert [d["endpoint_id"] for d in delivered["deliveries"]] == [endpoint_id]
    [received] = await e2e.receiver.wait_for("/hook", 1)
    assert received.headers["webhook-id"] == delivered["id"]  # the event published while disabled never came
    assert ok(await workly(e2e, "endpoint-enable", endpoint_id)).out.strip() == (
        f"{endpoint_id} enabled (state healthy)"
    )

    assert ok(await workly(e2e, "endpoint-delete", endpoint_id)).out.strip() == f"{endpoint_id} deleted"
    gone = await workly(e2e, "endpoint", endpoint_id)
    assert (gone.code, gone.err) == (1, f"workly: 404 Not Found: endpoint '{endpoint_id}' does not exist\n")
    again = await workly(e2e, "endpoint-delete", endpoint_id, "--json")
    assert again.code == 1 and again.err.startswith("workly: 404 Not Found: ") and again.out == ""
    assert ok(await workly(e2e, "endpoints", "--json")).json() == {"endpoints": [], "next_cursor": None}
    assert ok(await workly(e2e, "endpoints")).out.strip() == "no endpoints"

    every = await create(e2e, "/all", "--events", "*")
    assert every["event_types"] is None  # '*' alone: every type
    deleted = ok(await workly(e2e, "endpoint-delete", every["id"], "--json")).json()
    assert deleted == {"id": every["id"], "deleted": True}


def test_bad_input_exits_2_before_anything_is_sent() -> None:
    url = "http://127.0.0.1:9/bad"
    for args, says in [
        (["publish", "invoice.paid", "--data", "{not json"], "the --data value is not JSON"),
        (["publish", "invoice.paid", "--data", "@/nonexistent/payload.json"], "cannot read"),
        (["publish", "invoice.paid", "--data", "{}", "--delay", "soon"], "'soon' is not a duration"),
        (["endpoint-create", url, "--events", "a", "--header", "nocolon"], "is not a header"),
        (["endpoint-create", url, "--events", "a", "--header", "X: 1", "--header", "x: 2"], "given twice"),
        (["endpoint-create", url, "--events", "*", "--events", "a"], "give it alone"),
        (["endpoint", ""], "'' is not an endpoint id (ep_…)"),
        (["endpoint-disable", "ep/x"], "'ep/x' is not an endpoint id"),
        (["event", "evt\nx"], "is not an event id (evt_…)"),
        (["endpoints", "--server", "http://[::1"], "is not a URL"),
        (["events", "--token", "é"], "the token holds characters"),
    ]:
        run, sent = offline(*args)
        assert (run.code, run.out, sent) == (2, "", []), run  # nothing sent: no endpoint, no event made
        assert says in run.err and "Traceback" not in run.err and len(run.err.splitlines()) == 1, run
    for args in (["endpoint-create", url], ["publish", "invoice.paid"], ["endpoints", "--limit", "0"]):
        run, sent = offline(*args)  # a required option missing, a limit out of range: typer's usage error
        assert (run.code, run.out, sent) == (2, "", []), run


async def test_what_the_server_refuses_exits_1_with_its_reason(e2e: E2E) -> None:
    refused = await workly(e2e, "endpoint-create", "ftp://127.0.0.1/x", "--events", "a")
    assert refused.code == 1 and refused.err.startswith("workly: 422 Unprocessable ")
    pattern = await workly(e2e, "endpoint-create", e2e.receiver.url("/x"), "--events", "not a type")
    assert pattern.code == 1 and "event type pattern 'not a type' must be" in pattern.err
    bad_type = await workly(e2e, "publish", "no spaces allowed", "--data", "{}")
    assert bad_type.code == 1 and "event type 'no spaces allowed' must be" in bad_type.err
    missing = await workly(e2e, "event", "evt_nope")
    assert (missing.code, missing.err) == (1, "workly: 404 Not Found: event 'evt_nope' does not exist\n")
    for command in ("endpoint-enable", "endpoint-disable", "endpoint-delete"):
        run = await workly(e2e, command, "ep_nope")
        assert (run.code, run.err) == (1, "workly: 404 Not Found: endpoint 'ep_nope' does not exist\n"), run
    wrong = await workly(e2e, "endpoints", env={"WORKLY_TOKEN": "wrong"})
    assert wrong.code == 1
    assert wrong.err.startswith(
        "workly: 401 Unauthorized: the server wants a valid API token (--token or WORKLY_TOKEN)"
    )
    assert ok(await workly(e2e, "endpoints", "--json")).json()["endpoints"] == []


async def test_an_ed25519_endpoint_prints_only_the_public_key_its_receiver_needs(e2e: E2E) -> None:
    text = ok(
        await workly(e2e, "endpoint-create", e2e.receiver.url("/ed"), "--events", "a.b", "--ed25519")
    ).out
    public = text.splitlines()[-1].removeprefix("public key ")
    assert public.startswith("whpk_") and "whsk_" not in text
    endpoint = text.split()[0]
    assert (await e2e.client.get(f"/v1/endpoints/{endpoint}/public-key")).json()["public_key"] == public
    ok(await workly(e2e, "publish", "a.b", "--data", '{"n": 1}'))
    [delivered] = await e2e.receiver.wait_for("/ed", 1)
    [entry] = delivered.headers["webhook-signature"].split()
    signed = f"{delivered.headers['webhook-id']}.{delivered.headers['webhook-timestamp']}.".encode()
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public.removeprefix("whpk_")))
    key.verify(base64.b64decode(entry.removeprefix("v1a,")), signed + delivered.body)  # raises if forged


async def test_the_real_entry_point_creates_an_endpoint(e2e: E2E) -> None:
    """`python -m workly` in its own process, over the server's socket: what the tests above
    run in-process is the command a user runs."""
    run = await real_workly(e2e, "endpoint-create", e2e.receiver.url("/smoke"), "--events", "a.b", "--json")
    assert run.code == 0 and not run.err, run
    created = run.json()
    assert created["signing_secret"].startswith("whsec_")
    assert (await e2e.client.get(f"/v1/endpoints/{created['id']}")).json()["event_types"] == ["a.b"]
