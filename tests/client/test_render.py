from __future__ import annotations

from typing import Any

from workly.client import render


def task(**fields: Any) -> dict[str, Any]:
    return {
        "id": "task_1", "queue": "q", "status": "failed", "attempts": 2, "max_attempts": 2,
        "run_at": "2026-11-30T09:10:06.972118Z", "created_at": "2026-11-30T09:10:06Z",
        "updated_at": "2026-11-30T09:10:07.5Z", "last_status_code": None, "last_error": "timed out",
        "url": "http://127.0.0.1:9/hook", "method": "POST", "key": None, "tenant": None, "priority": 0,
        "stop_on": ["410"], "deadline": None, "min_backoff": 1.0, "max_backoff": 3600.0, "callback_url": None,
        "failure_callback_url": None, "callback_of": None,
        **fields,
    }  # fmt: skip


def test_table_aligns_columns_and_keeps_cells_on_one_line() -> None:
    lines = render.table(["A", "LONGER"], [["x" * 70, "two\nlines"], [None, 3]]).splitlines()
    assert lines[0] == "A" + " " * 59 + "  LONGER"
    assert lines[1] == "x" * 59 + "…  two lines"
    assert lines[2] == "-" + " " * 59 + "  3"


def test_task_rows_show_the_last_outcome() -> None:
    rows = render.task_rows([task(), task(id="task_2", status="succeeded", last_status_code=204)])
    header, failed, succeeded = rows.splitlines()
    assert header.split() == ["ID", "QUEUE", "STATUS", "ATTEMPTS", "RUN", "AT", "LAST", "URL"]
    assert failed.split() == [
        "task_1", "q", "failed", "2/2", "2026-11-30", "09:10:06Z", "timed", "out", "POST",
        "http://127.0.0.1:9/hook",
    ]  # fmt: skip
    assert succeeded.split()[5:7] == ["09:10:06Z", "204"]


def test_task_detail_lists_attempts_with_their_response() -> None:
    attempt = {
        "attempt": 1, "started_at": "2026-11-30T09:10:06.1Z", "duration_ms": 12.6, "status_code": 500,
        "error": None, "response": "boom\nline two", "stale": True,
    }  # fmt: skip
    text = render.task_detail(task(), [attempt])
    assert "request      POST http://127.0.0.1:9/hook" in text
    assert "attempts     2 of 2" in text
    assert text.splitlines()[-1].split() == [
        "1",
        "2026-11-30",
        "09:10:06Z",
        "13",
        "500",
        "(stale)",
        "boom",
        "line",
        "two",
    ]
    assert render.task_detail(task(), []).endswith("no attempts yet")


def test_queue_rows_show_counts_in_status_order() -> None:
    queue = {
        "name": "q", "paused": True, "counts": {"ready": 4, "failed": 1}, "max_concurrency": 3,
        "rate_limit": None,
    }  # fmt: skip
    header, row = render.queue_rows([queue]).splitlines()
    assert header.split() == [
        "QUEUE", "STATE", "READY", "RUNNING", "SUCCEEDED", "FAILED", "CANCELED", "CONCURRENCY", "RATE/S",
    ]  # fmt: skip
    assert row.split() == ["q", "paused", "4", "0", "0", "1", "0", "3", "-"]


def test_enqueued_is_one_line_with_id_queue_and_due_time() -> None:
    assert render.enqueued(task(status="ready")) == "task_1 ready in queue q, due 2026-11-30 09:10:06Z"


def test_control_characters_from_a_receiver_never_reach_the_terminal() -> None:
    hostile = "\x1b]0;PWNED\x07 ok \x1b]52;c;Y2xpcA==\x07 \x9b31m"
    [_, row] = render.table(["RESPONSE"], [[hostile]]).splitlines()
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in row)
    assert row.startswith("\\x1b]0;PWNED\\x07 ok \\x1b]52;c;")


def endpoint(**fields: Any) -> dict[str, Any]:
    health = {
        "state": "failing", "consecutive_failures": 2, "failing_since": "2026-11-30T09:10:06.5Z",
        "last_success_at": "2026-11-30T08:00:00Z", "disabled_reason": None, "probe_at": None,
    }  # fmt: skip
    return {
        "id": "ep_1", "url": "http://127.0.0.1:9/hook", "description": None,
        "event_types": ["invoice.*", "order.paid"], "tenant": None, "headers": {"X-A": "1", "X-B": "two"},
        "max_concurrency": 3, "rate_limit": None, "max_attempts": 10, "min_backoff": 1.0,
        "max_backoff": 3600.0, "timeout": 30.0, "ordering": "none", "enabled": True, "health": health,
        "created_at": "2026-11-30T07:00:00Z", "updated_at": "2026-11-30T07:00:00Z", **fields,
    }  # fmt: skip


def event(**fields: Any) -> dict[str, Any]:
    return {
        "id": "evt_1", "type": "invoice.paid", "tenant": None, "key": None, "idempotency_key": None,
        "payload": {"invoice": 7}, "payload_base64": "eyJpbnZvaWNlIjo3fQ==",
        "run_at": "2026-11-30T09:10:06Z", "created_at": "2026-11-30T09:10:06Z",
        "deliveries": [
            {"endpoint_id": "ep_1", "task_id": "task_1", "status": "succeeded", "attempts": 1},
            {"endpoint_id": "ep_2", "task_id": "task_2", "status": "ready", "attempts": 3},
            {"endpoint_id": "ep_3", "task_id": "task_3", "status": "succeeded", "attempts": 2},
        ],
        **fields,
    }  # fmt: skip


def test_endpoint_rows_show_state_types_failures_and_last_success() -> None:
    header, row, every = render.endpoint_rows(
        [endpoint(), endpoint(event_types=None, tenant="acme")]
    ).splitlines()
    assert header.split() == ["ID", "STATE", "URL", "EVENTS", "TENANT", "FAILURES", "LAST", "SUCCESS"]
    assert row.split() == [
        "ep_1", "failing", "http://127.0.0.1:9/hook", "invoice.*,order.paid", "-", "2",
        "2026-11-30", "08:00:00Z",
    ]  # fmt: skip
    assert every.split()[3:5] == ["*", "acme"]  # null event_types: every type


def test_endpoint_detail_shows_health_and_settings_and_the_secret_only_when_given() -> None:
    text = render.endpoint_detail(endpoint(rate_limit=2.5))
    assert "state            failing" in text and "event types      invoice.*,order.paid" in text
    assert "headers          X-A: 1; X-B: two" in text and "failing since    2026-11-30 09:10:06Z" in text
    assert "rate limit       2.5/s" in text and "backoff          1s to 3600s" in text
    assert "signing secret" not in text
    assert render.endpoint_detail(endpoint(), "whsec_x").splitlines()[-1] == "signing secret   whsec_x"


def test_endpoint_created_prints_the_id_and_what_its_receiver_verifies_with() -> None:
    with_secret = {**endpoint(tenant="acme"), "signing_secret": "whsec_x"}
    assert render.endpoint_created(with_secret).splitlines() == [
        "ep_1 created: POST http://127.0.0.1:9/hook for invoice.*,order.paid (tenant acme)",
        "signing secret whsec_x",
    ]
    with_key = {**endpoint(), "public_key": "whpk_x"}
    assert render.endpoint_created(with_key).splitlines()[-1] == "public key whpk_x"


def test_published_lists_the_deliveries_or_says_there_are_none() -> None:
    lines = render.published(event(), created=True).splitlines()
    assert lines[0] == "evt_1 published: invoice.paid to 3 endpoints"
    assert [line.split() for line in lines[2:]] == [
        ["ENDPOINT", "TASK", "STATUS", "ATTEMPTS"], ["ep_1", "task_1", "succeeded", "1"],
        ["ep_2", "task_2", "ready", "3"], ["ep_3", "task_3", "succeeded", "2"],
    ]  # fmt: skip
    again = render.published(event(deliveries=event()["deliveries"][:1]), created=False)
    assert again.startswith("evt_1 was published before (same idempotency key): invoice.paid to 1 endpoint\n")
    assert render.published(event(deliveries=[]), created=True) == (
        "evt_1 published: invoice.paid, to no endpoint (none enabled subscribes to it)"
    )


def test_event_rows_count_deliveries_per_status() -> None:
    header, row, none = render.event_rows([event(), event(id="evt_2", deliveries=[])]).splitlines()
    assert header.split() == ["ID", "TYPE", "TENANT", "CREATED", "DELIVERIES"]
    assert row.split() == [
        "evt_1",
        "invoice.paid",
        "-",
        "2026-11-30",
        "09:10:06Z",
        "1",
        "ready,",
        "2",
        "succeeded",
    ]
    assert none.split()[-1] == "-"


def test_event_detail_shows_the_payload_compact_or_its_size() -> None:
    text = render.event_detail(event())
    assert 'payload          {"invoice":7}' in text and text.splitlines()[-1].split()[2] == "succeeded"
    assert "payload          null" in render.event_detail(event(payload=None, payload_base64="bnVsbA=="))
    binary = render.event_detail(event(payload=None, payload_base64="AAEC", deliveries=[]))
    assert "payload          3 bytes, not JSON (payload_base64 in --json)" in binary
    assert binary.endswith(
        "no deliveries: none of its tenant's enabled endpoints took it (its type, its filter) when it "
        "was published, or those that did were deleted since"
    )
    long = render.event_detail(event(payload="x" * 1000))
    assert "… (--json shows it all)" in long and len(long.splitlines()[7]) < 400


def test_task_detail_shows_the_retry_policy_and_callbacks() -> None:
    plain = render.task_detail(task(), [])
    lines = {line.split("  ")[0]: line.split()[-1] for line in plain.splitlines() if "  " in line}
    assert (lines["stops on"], lines["backoff"]) == ("410", "s")
    assert "1-3600 s" in plain
    assert "deadline" not in plain and "callback" not in plain
    shown = render.task_detail(
        task(stop_on=[], deadline=300.0, failure_callback_url="http://127.0.0.1:9/ko", callback_of="task_0"),
        [],
    )
    assert "nothing: every failure is retried" in shown and "300 s after creation/redrive" in shown
    assert "failure callback  http://127.0.0.1:9/ko" in shown and "callback of       task_0" in shown


def test_a_running_task_says_who_holds_it_and_until_when() -> None:
    lease = {"holder": "worker-3:4242", "expires_at": "2026-12-02T10:31:05.123456Z"}
    running = render.task_detail(task(status="running", lease=lease), [])
    assert "held by      worker-3:4242 until 2026-12-02 10:31:05Z" in running
    assert "held by" not in render.task_detail(task(status="ready", lease=None), [])
