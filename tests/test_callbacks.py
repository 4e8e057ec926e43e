"""What a callback task is (workly/callbacks.py): pure functions, no I/O."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime

from workly.callbacks import CALLBACK_QUEUE, DueCallback, callback_task
from workly.models import Attempt, Task

NOW = datetime(2030, 1, 1, tzinfo=UTC)
TASK = Task(
    id="task_1", queue="q", status="failed", url="https://api.example/x", method="POST",
    headers={"authorization": "Bearer sk_live_secret", "content-type": "application/json"},
    body=b'{"order": 7}', run_at=NOW, priority=0, key=None, tenant="acme", idempotency_key=None,
    attempts=3, max_attempts=3, timeout=30, last_status_code=502, last_error="HTTP 502",
    created_at=NOW, updated_at=NOW, callback_url="https://app.example/ok",
    failure_callback_url="https://app.example/ko",
)  # fmt: skip
ANSWER = Attempt(
    task_id="task_1", attempt=3, started_at=NOW, finished_at=NOW, status_code=502, error="HTTP 502",
    duration_ms=1.0, response=b"\x00\xffbad gateway", stale=False,
)  # fmt: skip


def test_a_failure_callback_goes_to_the_failure_url_with_the_task_and_the_exact_answer() -> None:
    made = callback_task(DueCallback(TASK, ANSWER, seq=1), "task_cb")
    assert made is not None
    assert (made.id, made.queue, made.url, made.callback_of, made.tenant) == (
        "task_cb",
        CALLBACK_QUEUE,
        "https://app.example/ko",
        "task_1",
        "acme",
    )
    assert (made.callback_url, made.failure_callback_url) == (None, None)  # a callback has no callback
    assert made.idempotency_key == "task_1:1"
    document = json.loads(made.body)
    assert document["type"] == "workly.task.failed"
    assert base64.b64decode(document["response_base64"]) == b"\x00\xffbad gateway"
    assert (document["attempt"]["attempt"], document["attempt"]["status_code"]) == (3, 502)
    assert "response" not in document["attempt"]


def test_a_callback_never_shows_the_request_headers() -> None:
    made = callback_task(DueCallback(TASK, ANSWER, seq=1), "task_cb")
    assert made is not None
    assert b"sk_live_secret" not in made.body
    shown = json.loads(made.body)["task"]
    assert "headers" not in shown and "body" not in shown
    assert base64.b64decode(shown["body_base64"]) == b'{"order": 7}'


def test_no_answer_is_null_and_each_outcome_has_its_own_key() -> None:
    timed_out = replace(ANSWER, status_code=None, error="timeout", response=b"")
    made = callback_task(DueCallback(TASK, timed_out, seq=2), "task_cb")
    assert made is not None
    assert json.loads(made.body)["response_base64"] is None
    assert made.idempotency_key == "task_1:2"


def test_a_success_goes_to_the_success_url_and_other_states_have_none() -> None:
    succeeded = replace(TASK, status="succeeded")
    made = callback_task(DueCallback(succeeded, ANSWER, seq=1), "task_cb")
    assert made is not None and made.url == "https://app.example/ok"
    assert json.loads(made.body)["type"] == "workly.task.succeeded"
    assert callback_task(DueCallback(replace(TASK, failure_callback_url=None), ANSWER, seq=1), "x") is None
    assert callback_task(DueCallback(replace(TASK, status="ready"), ANSWER, seq=1), "x") is None
