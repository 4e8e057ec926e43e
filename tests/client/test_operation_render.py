"""How the client shows bulk operations: the progress line, the summary, the list and one in full."""

from __future__ import annotations

import io
from typing import Any

from workly.client import render
from workly.client.operations import ProgressLine


def operation(**fields: Any) -> dict[str, Any]:
    return {
        "id": "op_1", "action": "retry", "filter": {"queue": "q", "status": "failed"}, "state": "running",
        "matched": 1000, "changed": 430, "skipped": 20, "error": None,
        "created_at": "2026-11-30T09:10:06.972118Z", "updated_at": "2026-11-30T09:10:07Z",
        "finished_at": None,
        **fields,
    }  # fmt: skip


def test_the_progress_line_fills_its_bar_with_what_is_done() -> None:
    assert (
        render.operation_progress(operation()) == "[#########           ] 450/1000  changed 430  skipped 20"
    )
    done = operation(changed=980, skipped=20)
    assert render.operation_progress(done) == "[####################] 1000/1000  changed 980  skipped 20"
    assert render.operation_progress(operation(matched=0, changed=0, skipped=0)).startswith(
        "[####################] 0/0"
    )  # nothing matched: nothing left to do
    assert render.operation_progress(operation(changed=0, skipped=0)).startswith("[" + " " * 20 + "] 0/1000")


def test_the_summary_says_how_it_ended() -> None:
    succeeded = operation(state="succeeded", changed=980, skipped=20)
    assert render.operation_summary(succeeded) == "op_1 succeeded: 1000 matched, 980 changed, 20 skipped"
    failed = operation(state="failed", error="database\nunavailable")
    assert render.operation_summary(failed) == (
        "op_1 failed: 1000 matched, 430 changed, 20 skipped; database unavailable"
    )


def test_operation_rows_and_detail_show_the_filter() -> None:
    header, row = render.operation_rows([operation()]).splitlines()
    assert header.split() == ["ID", "ACTION", "STATE", "MATCHED", "CHANGED", "SKIPPED", "CREATED", "FILTER"]
    assert row.split() == [
        "op_1", "retry", "running", "1000", "430", "20", "2026-11-30", "09:10:06Z", "queue=q",
        "status=failed",
    ]  # fmt: skip
    detail = render.operation_detail(operation(state="succeeded", finished_at="2026-11-30T09:10:08.1Z"))
    assert "filter    queue=q status=failed" in detail.splitlines()
    assert "finished  2026-11-30 09:10:08Z" in detail.splitlines()


def test_the_progress_line_is_redrawn_in_place_and_cleared() -> None:
    out = io.StringIO()
    line = ProgressLine(out)
    line.clear()  # nothing drawn: nothing to clear
    line.draw("[##  ] 1/2")
    line.draw("[##  ] 1/2")  # unchanged: not written again
    line.draw("[####] 2/2")
    line.clear()
    assert out.getvalue() == "\r[##  ] 1/2\x1b[K\r[####] 2/2\x1b[K\r\x1b[K"
