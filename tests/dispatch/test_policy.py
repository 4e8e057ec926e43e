"""Retry policy: success, permanent failure, backoff with full jitter, Retry-After."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from workly.dispatch.policy import DeliveryOutcome, backoff_delay, judge, parse_retry_after
from workly.models import ClaimedTask

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def claimed(
    attempt: int = 1, max_attempts: int = 5, min_backoff: float = 1, max_backoff: float = 60
) -> ClaimedTask:
    return ClaimedTask(
        seq=1, id="task_x", queue="q", url="http://127.0.0.1:9/", method="POST", headers={}, body=b"",
        attempt=attempt, max_attempts=max_attempts, timeout=30, min_backoff=min_backoff,
        max_backoff=max_backoff, lease_token="lease",
    )  # fmt: skip


def outcome(
    status: int | None = None, error: str | None = None, retry_after: float | None = None
) -> DeliveryOutcome:
    return DeliveryOutcome(
        started_at=NOW, finished_at=NOW + timedelta(seconds=1), status_code=status, error=error,
        response=b"r", retry_after=retry_after,
    )  # fmt: skip


@pytest.mark.parametrize("status", [200, 201, 204, 299])
def test_2xx_succeeds(status: int) -> None:
    result = judge(claimed(), outcome(status), random.Random(1))
    assert (result.outcome, result.status_code, result.error, result.next_run_at) == (
        "succeeded",
        status,
        None,
        None,
    )


def test_410_fails_at_once_even_with_attempts_left() -> None:
    result = judge(claimed(attempt=1, max_attempts=10), outcome(410), random.Random(1))
    assert result.outcome == "failed"
    assert result.error is not None and "410" in result.error


@pytest.mark.parametrize("status", [301, 302, 400, 404, 429, 500, 503])
def test_other_statuses_are_retried(status: int) -> None:
    result = judge(claimed(), outcome(status), random.Random(1))
    assert result.outcome == "retry"
    assert result.error == f"HTTP {status}"
    assert result.next_run_at is not None and result.next_run_at >= NOW + timedelta(seconds=1)


def test_connection_errors_are_retried_with_their_message() -> None:
    result = judge(claimed(), outcome(error="connection failed: refused"), random.Random(1))
    assert (result.outcome, result.status_code, result.error) == ("retry", None, "connection failed: refused")


def test_the_last_attempt_fails() -> None:
    assert judge(claimed(attempt=5, max_attempts=5), outcome(500), random.Random(1)).outcome == "failed"
    assert judge(claimed(attempt=4, max_attempts=5), outcome(500), random.Random(1)).outcome == "retry"


def test_backoff_grows_exponentially_within_its_bounds() -> None:
    rng = random.Random(7)
    for attempt in range(1, 30):
        ceiling = min(600.0, 2.0 * 2 ** (attempt - 1))
        delays = [backoff_delay(attempt, 2.0, 600.0, rng) for _ in range(200)]
        assert all(2.0 <= d <= ceiling for d in delays)
    assert backoff_delay(1, 2.0, 600.0, rng) == 2.0  # first retry waits exactly min_backoff


def test_backoff_is_jittered_across_the_whole_range() -> None:
    rng = random.Random(3)
    delays = [backoff_delay(8, 1.0, 3600.0, rng) for _ in range(2000)]
    assert min(delays) < 20 and max(delays) > 110  # range [1, 128]: spread, not clustered


def test_huge_attempt_numbers_do_not_overflow() -> None:
    assert backoff_delay(10_000, 1.0, 3600.0, random.Random(1)) <= 3600.0


def test_retry_after_is_honoured_on_429_and_503_and_capped() -> None:
    for status in (429, 503):
        result = judge(claimed(max_backoff=60), outcome(status, retry_after=42), random.Random(1))
        assert result.next_run_at == NOW + timedelta(seconds=1 + 42)
    capped = judge(claimed(max_backoff=60), outcome(429, retry_after=10_000), random.Random(1))
    assert capped.next_run_at == NOW + timedelta(seconds=1 + 60)


def test_retry_after_is_ignored_on_other_statuses() -> None:
    result = judge(claimed(min_backoff=1, max_backoff=1), outcome(500, retry_after=42), random.Random(1))
    assert result.next_run_at == NOW + timedelta(seconds=1 + 1)


def test_parse_retry_after() -> None:
    assert parse_retry_after("120", NOW) == 120.0
    assert parse_retry_after(" 5 ", NOW) == 5.0
    assert parse_retry_after("Tue, 01 Jan 2030 00:01:00 GMT", NOW) == 60.0
    assert parse_retry_after("Mon, 31 Dec 2029 00:00:00 GMT", NOW) == 0.0  # in the past
    assert parse_retry_after(None, NOW) is None
    assert parse_retry_after("soon", NOW) is None
    assert parse_retry_after("-5", NOW) is None
