"""Callbacks: a task's outcome told to the application that enqueued it (docs/failures.md).

A task (or an event, for each of its deliveries) may name a ``callback_url``, called once
after it succeeded, and a ``failure_callback_url``, called once after it failed for good.
The storage marks such a task when it records the final outcome (in that transaction, so
no callback is lost); the service's sender (service/callbacks.py) then enqueues the
callback as a Workly task of its own, in the ``CALLBACK_QUEUE`` queue: signed, retried,
visible through the API with ``callback_of`` set. This module says what that task is.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from workly.models import Attempt, NewTask, Task
from workly.reserved_names import QUEUE_PREFIX
from workly.task_json import attempt_json, task_json
from workly.webhooks import origin_of

# Callbacks go to the application's own server, not to the receiver the task called: they
# get a queue of their own, so the original queue's rate limit and concurrency (set for
# that receiver) do not hold them back. It is created with defaults, and can be
# configured like any queue.
CALLBACK_QUEUE = f"{QUEUE_PREFIX}callbacks"
SUCCEEDED = "workly.task.succeeded"
FAILED = "workly.task.failed"


@dataclass(frozen=True, slots=True)
class DueCallback:
    """A finished task whose callback is yet to be sent, with its last attempt."""

    task: Task
    attempt: Attempt | None  # None only if its attempts were deleted
    seq: int  # which of the task's outcomes with a callback this is (1, 2, … across redrives)


def callback_url(task: Task) -> str | None:
    """Where a finished task's callback goes (None: it has none for this outcome)."""
    if task.status == "succeeded":
        return task.callback_url
    if task.status == "failed":
        return task.failure_callback_url
    return None


# Left out of the task a callback shows: its request headers (they often hold the
# credentials of the API the task called, which the callback's receiver must not get) and
# the body as JSON or text (body_base64 holds the same bytes, exact, whatever they are).
_NOT_IN_CALLBACKS = ("headers", "body")


def callback_body(due: DueCallback) -> bytes:
    """The JSON a callback carries: the outcome, the task (without its request headers), its
    last attempt, and the last response's body, exact, as base64 (up to
    WORKLY_MAX_BODY_BYTES; null when the last attempt got no answer)."""
    task, attempt = due.task, due.attempt
    shown_task = task_json(task)
    for name in _NOT_IN_CALLBACKS:
        del shown_task[name]
    shown_task["body_base64"] = base64.b64encode(task.body).decode() if task.body else None
    shown_attempt = response = None
    if attempt is not None:
        shown_attempt = attempt_json(attempt)
        del shown_attempt["response"]  # response_base64 carries it, byte for byte
        if attempt.status_code is not None:
            response = base64.b64encode(attempt.response).decode()
    document = {
        "type": SUCCEEDED if task.status == "succeeded" else FAILED,
        "task": shown_task,
        "attempt": shown_attempt,
        "response_base64": response,
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def callback_task(due: DueCallback, task_id: str) -> NewTask | None:
    """The task that delivers ``due``'s callback, or None if its outcome has none. Its
    idempotency key names the task and which of its outcomes this is, so a callback enqueued
    twice (two senders, a crash before the mark was cleared) is stored once, while a
    redriven task that finishes again gets a callback of its own. A callback has no
    callback."""
    url = callback_url(due.task)
    if url is None:
        return None
    return NewTask(
        id=task_id,
        queue=CALLBACK_QUEUE,
        url=url,
        headers={"content-type": "application/json"},
        body=callback_body(due),
        tenant=due.task.tenant,
        idempotency_key=f"{due.task.id}:{due.seq}",
        breaker=origin_of(url),
        callback_of=due.task.id,
    )
