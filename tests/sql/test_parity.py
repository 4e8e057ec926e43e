"""The SQL function enqueue_task and the API refuse and accept the same inputs, and store
the same task for what they accept.

One table of inputs (and hypothesis strategies around it, tests/sql/parity_inputs.py) goes to
both: the real API in-process (``POST /v1/queues/{queue}/tasks``, dispatcher off) and
``enqueue_task`` on a connection to the same database, in a transaction that is rolled back
(tests/sql/parity.py says how fields become arguments). The one documented difference: a URL
whose host has non-ASCII characters (an IDN) must be written in punycode for SQL.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import asyncpg
import pytest
from hypothesis import HealthCheck, event, given, settings

from tests.sql.parity import Rig, Verdict
from tests.sql.parity_inputs import TABLE, URL, inputs, valid_inputs

# SQL type of each argument of enqueue_task.
TYPES = {
    "queue": "text", "url": "text", "method": "text", "headers": "jsonb", "body": "jsonb",
    "body_base64": "text", "delay": "float8", "run_at": "timestamptz", "priority": "bigint", "key": "text",
    "tenant": "text", "idempotency_key": "text", "max_attempts": "bigint", "timeout": "float8",
    "stop_on": "text[]", "deadline": "float8", "min_backoff": "float8", "max_backoff": "float8",
    "callback_url": "text", "failure_callback_url": "text",
}  # fmt: skip
# Columns both paths must store alike (body and times are compared apart).
COMPARED = ("queue", "url", "method", "priority", "key", "tenant", "idempotency_key", "max_attempts",
            "timeout", "stop_on", "deadline", "min_backoff", "max_backoff", "callback_url",
            "failure_callback_url", "breaker", "status", "held_run_at")  # fmt: skip


async def api_enqueue(rig: Rig, queue: str, fields: dict[str, Any]) -> Verdict:
    return await rig.api(f"/v1/queues/{quote(queue, safe='')}/tasks", "tasks", fields)


async def sql_enqueue(rig: Rig, queue: str, fields: dict[str, Any]) -> Verdict:
    return await rig.sql("enqueue_task", "tasks", TYPES, {"queue": queue, **fields}, json_null="body")


def _idn_refusal(verdict: Verdict) -> bool:
    return not verdict.accepted and "punycode" in verdict.detail


async def check_parity(rig: Rig, queue: str, fields: dict[str, Any]) -> None:
    sql = await sql_enqueue(rig, queue, fields)
    if _idn_refusal(sql):
        return  # the documented difference
    api = await api_enqueue(rig, queue, fields)
    event(f"accepted: {api.accepted}")
    assert api.accepted == sql.accepted, f"API: {api.detail}\nSQL: {sql.detail}\ninput: {queue!r} {fields!r}"
    if api.row is not None and sql.row is not None:
        assert_same_task(api.row, sql.row, fields)


def assert_same_task(api: dict[str, Any], sql: dict[str, Any], fields: dict[str, Any]) -> None:
    for column in COMPARED:
        assert api[column] == sql[column], f"{column}: API {api[column]!r}, SQL {sql[column]!r}"
    api_headers, sql_headers = json.loads(api["headers"]), json.loads(sql["headers"])
    assert api_headers == sql_headers
    if _json_body(api_headers, fields):
        # Both JSON; PostgreSQL writes jsonb with its own spacing and key order.
        # Numbers as decimals: 1e16 and 10000000000000000 are one JSON number, written two ways.
        assert _decimal_json(api["body"]) == _decimal_json(sql["body"])
    else:
        assert bytes(api["body"]) == bytes(sql["body"])
    if "run_at" in fields and fields["run_at"] is not None:
        assert api["run_at"] == sql["run_at"]
    else:  # due after the same delay (0 by default) from its creation
        api_due, sql_due = api["run_at"] - api["created_at"], sql["run_at"] - sql["created_at"]
        # (The API takes its "now" for delay a moment before the one it stores as created_at.)
        assert abs(api_due - sql_due) <= timedelta(seconds=1)


def _decimal_json(body: bytes) -> Any:
    return json.loads(body, parse_float=Decimal, parse_int=Decimal)


def _json_body(headers: dict[str, str], fields: dict[str, Any]) -> bool:
    if fields.get("body") is None:
        return False
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    media = content_type.split(";")[0].strip().lower()
    return not isinstance(fields["body"], str) or media == "application/json" or media.endswith("+json")


@pytest.mark.parametrize(("queue", "fields", "accepted"), TABLE)
async def test_the_table_gets_the_same_verdict_from_both(
    rig: Rig, queue: str, fields: dict[str, Any], accepted: bool
) -> None:
    sql, api = await sql_enqueue(rig, queue, fields), await api_enqueue(rig, queue, fields)
    assert (api.accepted, sql.accepted) == (accepted, accepted), f"API: {api.detail}\nSQL: {sql.detail}"
    if api.row is not None and sql.row is not None:
        assert_same_task(api.row, sql.row, fields)


async def test_an_idn_host_is_taken_by_the_api_and_must_be_punycode_in_sql(rig: Rig) -> None:
    fields = {"url": "https://bücher.example/hook"}
    assert (await api_enqueue(rig, "q", fields)).accepted
    assert _idn_refusal(await sql_enqueue(rig, "q", fields))
    assert (await sql_enqueue(rig, "q", {"url": "https://xn--bcher-kva.example/hook"})).accepted


async def test_a_refusal_names_the_field_in_its_message_and_diagnostics(rig: Rig) -> None:
    with pytest.raises(asyncpg.PostgresError) as refused:
        await rig.conn.fetchval(
            "SELECT enqueue_task(queue => 'q', url => $1, priority => 7, tenant => '')", URL
        )
    assert refused.value.sqlstate == "22023"
    assert str(refused.value).startswith("tenant: ")
    assert refused.value.column_name == "tenant"


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs)
async def test_generated_input_gets_the_same_verdict_and_the_same_task(
    rig: Rig, given_input: tuple[str, dict[str, Any]]
) -> None:
    queue, fields = given_input
    await check_parity(rig, queue, fields)


# Inputs both must accept, so that what they store is compared across every field.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(valid_inputs())
async def test_valid_input_is_stored_alike_by_both(rig: Rig, fields: dict[str, Any]) -> None:
    sql = await sql_enqueue(rig, "q", fields)
    api = await api_enqueue(rig, "q", fields)
    assert api.accepted and sql.accepted, f"API: {api.detail}\nSQL: {sql.detail}\ninput: {fields!r}"
    if api.row is not None and sql.row is not None:
        assert_same_task(api.row, sql.row, fields)
