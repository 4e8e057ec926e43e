"""What happens after an attempt: success, a retry (when), or failure. Pure logic."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from workly.models import AttemptResult, ClaimedTask, Outcome

PERMANENT_STATUS = 410
RETRY_AFTER_STATUSES = frozenset({429, 503})


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


def judge(task: ClaimedTask, outcome: DeliveryOutcome, rng: random.Random) -> AttemptResult:
    code = outcome.status_code
    error = outcome.error
    if code is not None and not 200 <= code < 300:
        error = "410 Gone: permanent failure, not retried" if code == PERMANENT_STATUS else f"HTTP {code}"

    def result(verdict: Outcome, next_run_at: datetime | None = None) -> AttemptResult:
        return AttemptResult(
            task_seq=task.seq,
            lease_token=task.lease_token,
            attempt=task.attempt,
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
            status_code=code,
            error=error,
            response=outcome.response,
            outcome=verdict,
            next_run_at=next_run_at,
        )

    if code is not None and 200 <= code < 300:
        return result("succeeded")
    if code == PERMANENT_STATUS or outcome.permanent or task.attempt >= task.max_attempts:
        return result("failed")
    if code in RETRY_AFTER_STATUSES and outcome.retry_after is not None:
        delay = min(outcome.retry_after, task.max_backoff)
    else:
        delay = backoff_delay(task.attempt, task.min_backoff, task.max_backoff, rng)
    return result("retry", outcome.finished_at + timedelta(seconds=delay))
