from __future__ import annotations

from typing import Any

from workly.client import render


def task(**fields: Any) -> dict[str, Any]:
    return {
        "id": "task_1", "queue": "q", "status": "failed", "attempts": 2, "max_attempts": 2,
        "run_at": "2026-11-30T09:10:06.972118Z", "created_at": "2026-11-30T09:10:06Z",
        "updated_at": "2026-11-30T09:10:07.5Z", "last_status_code": None, "last_error": "timed out",
        "url": "http://127.0.0.1:9/hook", "method": "POST", "key": None, "tenant": None, "priority": 0,
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
