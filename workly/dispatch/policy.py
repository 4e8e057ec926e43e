"""What happens after an attempt: success, a retry (when), or failure. Pure logic."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from workly.models import AttemptResult, BreakerEffect, ClaimedTask, Outcome

PERMANENT_STATUS = 410
# Answers that say "later", not "never": retried whatever stop_on lists.
ALWAYS_RETRIED = frozenset({408, 425, 429})
RETRY_AFTER_STATUSES = frozenset({429, 503})
# What says an origin is in trouble: a 500 or 4xx on one path of a shared host says
# nothing about its other paths, a 429 or a gateway's error does.
ORIGIN_TROUBLE_STATUSES = frozenset({429, 502, 503, 504})
MIN_TELLING_TIMEOUT = 1.0  # seconds: a shorter attempt timeout says nothing about an origin


@dataclass(frozen=True, slots=True)
class DeliveryOutcome:
    """What one HTTP attempt produced, before any judgement."""

    started_at: datetime
    finished_at: datetime
    status_code: int | None = None
    error: str | None = None  # set when no HTTP response arrived
    response: bytes = b""
    retry_after: float | None = None  # seconds, from a Retry-After header
    permanent: bool = False  # retrying cannot help (the target is refused by policy)
    timed_out: bool = False  # no response head within the attempt's timeout


def backoff_delay(attempt: int, min_backoff: float, max_backoff: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter: uniform in [min, min·2^(attempt-1)], capped at max."""
    ceiling = min(max_backoff, min_backoff * 2 ** min(attempt - 1, 62))
    return rng.uniform(min_backoff, max(min_backoff, ceiling))


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Retry-After as delay-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


def stops_on(code: int, stop_on: Sequence[str]) -> bool:
    """Whether an answer ends the task without a retry: its code or its class ("4xx") is
    listed, and it is not one of the always-retried 408, 425, 429."""
    if code in ALWAYS_RETRIED:
        return False
    text = str(code)
    return text in stop_on or f"{text[0]}xx" in stop_on


def deadline_passed(deadline_at: datetime) -> str:
    return f"deadline passed: no attempt may start after {deadline_at.isoformat().replace('+00:00', 'Z')}"


def overdue(task: ClaimedTask, now: datetime) -> AttemptResult | None:
    """A claimed task whose deadline has passed is not sent: it fails as it is, no attempt
    is kept for it, and it says nothing about its receiver."""
    if task.deadline_at is None or now < task.deadline_at:
        return None
    return AttemptResult(
        task_seq=task.seq,
        lease_token=task.lease_token,
        attempt=task.attempt,
        started_at=now,
        finished_at=now,
        status_code=None,
        error=deadline_passed(task.deadline_at),
        response=b"",
        outcome="failed",
        sent=False,
        breaker=task.breaker,
        endpoint_id=task.endpoint_id,
        task_id=task.id,
        has_callback=task.capture_response,
    )


def judge(
    task: ClaimedTask, outcome: DeliveryOutcome, rng: random.Random, kept_on_retry: int | None = None
) -> AttemptResult:
    """The attempt's result. ``kept_on_retry``: response bytes an attempt that will be retried
    keeps (a task with a callback captures up to WORKLY_MAX_BODY_BYTES, but only its last
    attempt's response is handed on; None: all of it)."""
    code = outcome.status_code
    error = outcome.error
    stop = code is not None and stops_on(code, task.stop_on)
    if code is not None and not 200 <= code < 300:
        if code == PERMANENT_STATUS and stop:
            error = "410 Gone: permanent failure, not retried"
        elif stop:
            error = f"HTTP {code}: listed in stop_on, not retried"
        else:
            error = f"HTTP {code}"

    def result(verdict: Outcome, next_run_at: datetime | None = None) -> AttemptResult:
        return AttemptResult(
            task_seq=task.seq,
            lease_token=task.lease_token,
            attempt=task.attempt,
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
            status_code=code,
            error=error,
            response=outcome.response
            if verdict != "retry" or kept_on_retry is None
            else outcome.response[:kept_on_retry],
            outcome=verdict,
            next_run_at=next_run_at,
            breaker=task.breaker,
            effect=breaker_effect(task, outcome),
            endpoint_id=task.endpoint_id,
            task_id=task.id,
            has_callback=task.capture_response,
        )

    if code is not None and 200 <= code < 300:
        return result("succeeded")
    # Attempts count across retries; the budget counts from the last redrive.
    tries = task.attempt - task.attempt_base
    if stop or outcome.permanent or tries >= task.max_attempts:
        return result("failed")
    if code in RETRY_AFTER_STATUSES and outcome.retry_after is not None:
        delay = min(outcome.retry_after, task.max_backoff)
    else:
        delay = backoff_delay(tries, task.min_backoff, task.max_backoff, rng)
    next_run_at = outcome.finished_at + timedelta(seconds=delay)
    if task.deadline_at is not None and next_run_at >= task.deadline_at:
        error = f"{deadline_passed(task.deadline_at)} (last attempt: {error})"
        return result("failed")
    return result("retry", next_run_at)


def breaker_effect(task: ClaimedTask, outcome: DeliveryOutcome) -> BreakerEffect | None:
    """What an attempt says about its receiver (workly/breaker.py). An answer the task's
    stop_on ends it on says nothing (but a 410 from an endpoint asks to disable it). Else an
    endpoint's every failure counts against it; a plain task's
    origin counts only the signs of trouble (no connection, a timeout, 429, 502, 503,
    504), and any other answer shows it is up. A delivery blocked by the outbound policy
    never reached the receiver: for an origin it says nothing."""
    code = outcome.status_code
    answered = code is not None and 200 <= code < 300
    stopped = code is not None and stops_on(code, task.stop_on)
    if stopped and not (task.endpoint_id is not None and code == PERMANENT_STATUS):
        # The receiver answered on purpose, and the task ends here: no sign of trouble, and
        # not a success of the receiver's either.
        return None
    if task.endpoint_id is not None:
        if answered:
            return "ok"
        # A 410 disables the endpoint unless its stop_on says to retry a 410.
        return "gone" if code == PERMANENT_STATUS and stopped else "fail"
    if outcome.permanent and code is None:
        return None
    if outcome.timed_out and task.timeout < MIN_TELLING_TIMEOUT:
        # A task that allowed under a second says more about itself than about its origin:
        # it must not be able to hold the origin's tasks of every other queue.
        return None
    if code is None or code in ORIGIN_TROUBLE_STATUSES:
        return "fail"
    return "ok"
