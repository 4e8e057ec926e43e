"""The SQL function publish_event and ``POST /v1/events`` refuse and accept the same inputs,
and store the same event, with the same deliveries, for what they accept (as
tests/sql/test_parity.py does for enqueue_task; tests/sql/parity.py maps fields to arguments).

Endpoints of two tenants and several subscriptions exist (made through the API), so a
publish fans out; the dispatcher is off and their URLs are loopback ones, so nothing is sent.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sql.parity import Rig, Verdict
from tests.sql.parity_inputs import json_values, texts, urls
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings

TYPES = {
    "type": "text", "payload": "jsonb", "payload_base64": "text", "tenant": "text", "key": "text",
    "idempotency_key": "text", "delay": "float8", "run_at": "timestamptz", "callback_url": "text",
    "failure_callback_url": "text", "labels": "jsonb",
}  # fmt: skip
COMPARED = (
    "type",
    "tenant",
    "key",
    "idempotency_key",
    "content_type",
    "callback_url",
    "failure_callback_url",
    "labels",
)
DELIVERIES = """
    SELECT endpoint_id, queue, url, method, headers::text AS headers, body, key, priority, breaker,
           callback_url, failure_callback_url, run_at, run_at - created_at AS due_in, held_run_at
    FROM tasks WHERE event_id = $1 ORDER BY endpoint_id
"""
ENDPOINTS = [
    {"url": "http://127.0.0.1:9/all"},
    {"url": "http://127.0.0.1:9/invoices", "event_types": ["invoice.*"], "headers": {"x-team": "billing"}},
    {
        "url": "http://127.0.0.1:9/paid",
        "event_types": ["invoice.paid"],
        "headers": {"Content-Type": "text/x"},
    },
    {"url": "http://127.0.0.1:9/acme", "tenant": "acme"},
    # Content filters (workly/event_filter.py; tests/sql/test_filter_jsonpath.py tries every
    # operator) and an envelope: the API's fan-out and the SQL function route alike.
    {"url": "http://127.0.0.1:9/eu", "filter": {"labels.region": "eu"}},
    {"url": "http://127.0.0.1:9/big", "filter": {"payload.amount": {"$gte": 100}}},
    {
        "url": "http://127.0.0.1:9/not-user",
        "filter": {
            "$not": {"type": {"$in": ["user.x", "user.signed_up"]}},
            "labels.tier": {"$exists": False},
        },
    },
    {
        "url": "http://127.0.0.1:9/acme-eu",
        "tenant": "acme",
        "filter": {"$or": [{"labels.region": "eu"}, {"payload": "x"}]},
    },
    {"url": "http://127.0.0.1:9/envelope", "payload_format": "envelope", "event_types": ["invoice.*"]},
]


@pytest.fixture
async def fanout(rig: Rig) -> Rig:
    for endpoint in ENDPOINTS:
        response = await rig.http.post("/v1/endpoints", json=endpoint)
        assert response.status_code == 201, response.text
    return rig


async def api_publish(rig: Rig, fields: dict[str, Any]) -> Verdict:
    return await rig.api("/v1/events", "events", fields, related=DELIVERIES)


async def sql_publish(rig: Rig, fields: dict[str, Any]) -> Verdict:
    return await rig.sql("publish_event", "events", TYPES, fields, json_null="payload", related=DELIVERIES)


async def check_parity(rig: Rig, fields: dict[str, Any], expected: bool | None = None) -> None:
    sql = await sql_publish(rig, fields)
    if not sql.accepted and "punycode" in sql.detail:
        return  # the documented difference (an IDN in a callback URL)
    api = await api_publish(rig, fields)
    assert api.accepted == sql.accepted, f"API: {api.detail}\nSQL: {sql.detail}\ninput: {fields!r}"
    if expected is not None:
        assert api.accepted == expected, api.detail
    if api.row is None or sql.row is None:
        return
    for column in COMPARED:
        assert api.row[column] == sql.row[column], column
    assert _payload(api.row) == _payload(sql.row)
    if fields.get("run_at") is not None:
        assert api.row["run_at"] == sql.row["run_at"]
    else:
        api_due, sql_due = (
            api.row["run_at"] - api.row["created_at"],
            sql.row["run_at"] - sql.row["created_at"],
        )
        assert abs(api_due - sql_due) <= timedelta(seconds=1)
    assert api.related is not None and sql.related is not None
    kind, absolute = api.row["content_type"], fields.get("run_at") is not None
    assert [_delivery(d, kind, absolute) for d in api.related] == [
        _delivery(d, kind, absolute) for d in sql.related
    ]


def _payload(row: dict[str, Any]) -> Any:
    if row["content_type"] == "application/json":  # jsonb's spacing and key order are its own
        return json.loads(row["payload"], parse_float=Decimal, parse_int=Decimal)
    return bytes(row["payload"])


def _delivery(row: dict[str, Any], content_type: str, absolute: bool) -> dict[str, Any]:
    """A delivery as both must store it: headers by lower-case name, the body as the payload,
    and when it is due: at the event's run_at when one was given (the two were made moments
    apart, so the time from creation differs), else so long after creation."""
    headers = {name.lower(): value for name, value in json.loads(row["headers"]).items()}
    body = _payload({"payload": row["body"], "content_type": content_type})
    if row["url"].endswith("/envelope"):  # made moments apart: the timestamps differ
        body = json.loads(row["body"], parse_float=Decimal, parse_int=Decimal)
        assert body.keys() >= {"type", "timestamp"}
        body["timestamp"] = "(when published)"
    shown = {**row, "headers": headers, "body": body}
    if absolute:
        del shown["due_in"]
    else:
        del shown["run_at"]
        shown["due_in"] = round(row["due_in"].total_seconds())
    return shown


TABLE: list[tuple[dict[str, Any], bool]] = [
    ({"type": "invoice.paid", "payload": {"amount": 9.5, "lines": [1, 2]}}, True),
    ({"type": "invoice.paid", "payload": None}, True),
    ({"type": "invoice.created", "tenant": "acme", "payload": "x"}, True),
    ({"type": "user.signed_up", "payload_base64": "AAEC"}, True),
    ({"type": "invoice.paid"}, False),
    ({"type": "invoice.paid", "payload": 1, "payload_base64": "AAEC"}, False),
    ({"type": "invoice.paid", "payload": None, "payload_base64": "AAEC"}, False),
    ({"type": "workly.task.failed", "payload": 1}, False),
    ({"type": "invoice..paid", "payload": 1}, False),
    ({"type": "a" * 128, "payload": 1}, True),
    ({"type": "a" * 129, "payload": 1}, False),
    ({"type": None, "payload": 1}, False),
    ({"payload": 1}, False),
    ({"type": "t", "payload": 1, "tenant": ""}, False),
    ({"type": "t", "payload": 1, "key": "k\x1f"}, False),
    ({"type": "t", "payload": 1, "idempotency_key": "parity-event-1"}, True),
    ({"type": "t", "payload": 1, "idempotency_key": "schedule:sch_x:2026-12-07T00:00:00Z"}, False),
    ({"type": "t", "payload": 1, "delay": 10, "run_at": "2030-01-01T00:00:00Z"}, False),
    ({"type": "t", "payload": 1, "delay": 31622401}, False),
    ({"type": "t", "payload": 1, "run_at": "3000-01-01T00:00:00+00:00"}, False),
    ({"type": "t", "payload": 1, "run_at": "2030-06-01T12:00:00+02:00"}, True),
    ({"type": "t", "payload": 1, "callback_url": "https://example.com/cb"}, True),
    ({"type": "t", "payload": 1, "failure_callback_url": "http://u@example.com/"}, False),
    ({"type": "t", "payload_base64": "A" * ((256 * 1024 // 3 + 1) * 4)}, False),
    ({"type": "invoice.paid", "payload": {"amount": 100}, "labels": {"region": "eu"}}, True),
    ({"type": "invoice.paid", "payload": {"amount": 99.5}, "labels": {"tier": "gold"}}, True),
    ({"type": "user.x", "tenant": "acme", "payload": "x", "labels": {}}, True),
    ({"type": "invoice.paid", "payload_base64": "AAEC", "labels": {"region": "eu"}}, True),
    ({"type": "t", "payload": 1, "labels": {"bad key": "v"}}, False),
    ({"type": "t", "payload": 1, "labels": {"k": 1}}, False),
    ({"type": "t", "payload": 1, "labels": {f"k{n}": "v" for n in range(11)}}, False),
    ({"type": "t", "payload": 1, "labels": ["region"]}, False),
]


@pytest.mark.parametrize(("fields", "accepted"), TABLE)
async def test_the_table_gets_the_same_verdict_and_the_same_event(
    fanout: Rig, fields: dict[str, Any], accepted: bool
) -> None:
    await check_parity(fanout, fields, accepted)


offsets = st.sampled_from([UTC, timezone(timedelta(hours=-3))])
numbers = st.one_of(
    st.none(), st.integers(-5, 40_000_000), st.floats(-5, 4e7), st.sampled_from([0, math.nan])
)
events = st.fixed_dictionaries(
    {
        "type": st.one_of(
            st.sampled_from(["invoice.paid", "invoice.created", "user.x", "workly.x", "a.", ".a", "", None]),
            st.from_regex(r"\A[A-Za-z0-9_.-]{1,12}\Z"),
        ),
    },
    optional={
        "payload": json_values,
        "payload_base64": st.one_of(st.none(), st.sampled_from(["", "YQ==", "YQ", "AAEC", "A==="])),
        "tenant": st.one_of(texts, st.just("acme")),
        "key": texts,
        "idempotency_key": texts,
        "delay": numbers,
        "run_at": st.one_of(
            st.none(),
            st.datetimes(datetime(1969, 12, 31), datetime(3000, 1, 1, 2), timezones=offsets).map(
                lambda d: d.isoformat()
            ),
        ),
        "callback_url": st.one_of(st.none(), urls),
        "failure_callback_url": st.one_of(st.none(), urls),
        "labels": st.one_of(
            st.none(),
            st.dictionaries(
                st.sampled_from(["region", "tier", "a-b_c", "bad key", "x" * 65, ""]),
                st.sampled_from(["eu", "us", "", "v" * 256, "v" * 257, 1, None]),
                max_size=4,
            ),
            st.sampled_from([[1], "eu", {f"k{n}": "v" for n in range(11)}]),
        ),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events)
async def test_generated_events_get_the_same_verdict_and_the_same_deliveries(
    fanout: Rig, fields: dict[str, Any]
) -> None:
    await check_parity(fanout, fields)


@pytest.mark.parametrize(
    ("fields", "paths"),
    [
        (
            {"type": "invoice.paid", "payload": {"amount": 100}, "labels": {"region": "eu"}},
            ["/all", "/invoices", "/paid", "/eu", "/big", "/not-user", "/envelope"],
        ),
        (
            {"type": "invoice.created", "payload": {"amount": 99.5}, "labels": {"tier": "gold"}},
            ["/all", "/invoices", "/envelope"],
        ),
        ({"type": "user.x", "payload": {"amount": 1e3}}, ["/all", "/big"]),
        ({"type": "user.x", "tenant": "acme", "payload": "x"}, ["/acme", "/acme-eu"]),
        (
            {"type": "invoice.paid", "payload_base64": "AAEC", "labels": {"region": "eu"}},
            ["/all", "/invoices", "/paid", "/eu", "/not-user", "/envelope"],
        ),
    ],
)
async def test_filters_route_the_same_events_to_the_same_endpoints(
    fanout: Rig, fields: dict[str, Any], paths: list[str]
) -> None:
    """The parity above, with the routes spelled out: a filter that matched nothing on either
    side would pass it too."""
    for verdict in (await api_publish(fanout, fields), await sql_publish(fanout, fields)):
        assert verdict.accepted and verdict.related is not None, verdict.detail
        reached = sorted(delivery["url"].removeprefix("http://127.0.0.1:9") for delivery in verdict.related)
        assert reached == sorted(paths)


async def test_an_envelope_wraps_the_payload_bytes_the_same_way(fanout: Rig) -> None:
    fields = {"type": "invoice.paid", "payload": {"b": 1, "a": [1.5, "é"]}}
    for verdict in (await api_publish(fanout, fields), await sql_publish(fanout, fields)):
        assert verdict.row is not None and verdict.related is not None
        [delivery] = [d for d in verdict.related if d["url"].endswith("/envelope")]
        stamp = verdict.row["created_at"].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        head = b'{"type":"invoice.paid","timestamp":"' + stamp.encode() + b'","data":'
        assert bytes(delivery["body"]) == head + bytes(verdict.row["payload"]) + b"}"
    raw = {"type": "invoice.paid", "payload_base64": "AAEC"}
    for verdict in (await api_publish(fanout, raw), await sql_publish(fanout, raw)):
        assert verdict.related is not None
        [delivery] = [d for d in verdict.related if d["url"].endswith("/envelope")]
        assert json.loads(delivery["body"])["data_base64"] == "AAEC"


async def test_strict_mode_refuses_an_unknown_type_from_sql_as_from_the_api(pg_url: str) -> None:
    options = Settings(database_url=pg_url, signing_secret=TEST_SECRET, dispatch=False, event_types="strict")
    async with in_process(options) as (_, http):
        conn = await asyncpg.connect(pg_url)
        try:
            rig = Rig(http, conn)
            fields = {"type": "invoice.paid", "payload": {"n": 1}}
            sql, api = await sql_publish(rig, fields), await api_publish(rig, fields)
            assert not sql.accepted and not api.accepted
            assert "catalogue" in sql.detail and "type" in sql.detail
            assert (await http.put("/v1/event-types/invoice.paid", json={})).status_code == 201
            assert (await sql_publish(rig, fields)).accepted and (await api_publish(rig, fields)).accepted
        finally:
            await conn.close()
