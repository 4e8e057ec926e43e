"""The retry policy's fields as a table: stop_on (codes, classes, the always-retried 408,
425 and 429), deadline, attempts counted from the last redrive, per-task backoffs."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from workly.dispatch.policy import DeliveryOutcome, judge, overdue, stops_on
from workly.models import ClaimedTask, check_stop_on

NOW = datetime(2030, 1, 1, tzinfo=UTC)
TASK = ClaimedTask(
    seq=1, id="task_x", queue="q", url="http://127.0.0.1:9/", method="POST", headers={}, body=b"",
    attempt=1, max_attempts=5, timeout=30, min_backoff=1, max_backoff=60, lease_token="lease",
)  # fmt: skip


def answered(status: int | None, error: str | None = None) -> DeliveryOutcome:
    return DeliveryOutcome(
        started_at=NOW, finished_at=NOW + timedelta(seconds=1), status_code=status, error=error
    )


@pytest.mark.parametrize(
    ("stop_on", "status", "stops"),
    [
        (("410",), 410, True),
        (("410",), 404, False),
        (("404",), 404, True),
        (("4xx",), 404, True),
        (("4xx",), 400, True),
        (("4xx",), 500, False),
        (("5xx",), 503, True),
        (("3xx",), 302, True),
        (("4xx",), 408, False),  # always retried
        (("4xx",), 425, False),
        (("4xx",), 429, False),
        (("429",), 429, False),  # even when named
        (("408", "425"), 408, False),
        ((), 410, False),  # an empty list retries everything
        (("404", "5xx"), 500, True),
    ],
)
def test_stops_on(stop_on: tuple[str, ...], status: int, stops: bool) -> None:
    assert stops_on(status, stop_on) is stops


@pytest.mark.parametrize(
    ("stop_on", "status", "verdict"),
    [
        (("4xx",), 404, "failed"),
        (("4xx",), 429, "retry"),
        (("410",), 404, "retry"),
        (("410",), 410, "failed"),
        ((), 410, "retry"),
        (("5xx",), 502, "failed"),
        (("5xx",), 200, "succeeded"),
    ],
)
def test_judge_applies_stop_on(stop_on: tuple[str, ...], status: int, verdict: str) -> None:
    result = judge(replace(TASK, stop_on=stop_on), answered(status), random.Random(1))
    assert result.outcome == verdict
    if verdict == "failed" and status != 410:
        assert result.error == f"HTTP {status}: listed in stop_on, not retried"


def test_connection_errors_are_never_stopped_by_stop_on() -> None:
    result = judge(
        replace(TASK, stop_on=("4xx", "5xx")), answered(None, "connection failed"), random.Random(1)
    )
    assert result.outcome == "retry"


@pytest.mark.parametrize(
    ("attempt", "attempt_base", "max_attempts", "verdict"),
    [
        (1, 0, 1, "failed"),
        (6, 0, 6, "failed"),
        (7, 6, 6, "retry"),  # the first attempt after a redrive of a task that used its 6
        (12, 6, 6, "failed"),  # … and its sixth
        (11, 6, 6, "retry"),
    ],
)
def test_max_attempts_counts_from_the_last_redrive(
    attempt: int, attempt_base: int, max_attempts: int, verdict: str
) -> None:
    task = replace(TASK, attempt=attempt, attempt_base=attempt_base, max_attempts=max_attempts)
    assert judge(task, answered(500), random.Random(1)).outcome == verdict


def test_backoff_after_a_redrive_starts_small_again() -> None:
    task = replace(TASK, attempt=31, attempt_base=30, min_backoff=1, max_backoff=3600, max_attempts=50)
    result = judge(task, answered(500), random.Random(1))
    assert result.next_run_at is not None
    assert result.next_run_at - (NOW + timedelta(seconds=1)) <= timedelta(
        seconds=1
    )  # attempt 1 of its budget


@pytest.mark.parametrize(
    ("deadline_in", "verdict"),
    [
        (None, "retry"),
        (3600, "retry"),  # the next attempt (within 1 s) starts before it
        (1.5, "failed"),  # the next attempt could only start after it
    ],
)
def test_deadline_stops_retries_that_would_start_after_it(deadline_in: float | None, verdict: str) -> None:
    deadline_at = None if deadline_in is None else NOW + timedelta(seconds=deadline_in)
    task = replace(TASK, min_backoff=1, max_backoff=1, deadline_at=deadline_at)
    result = judge(task, answered(503), random.Random(1))
    assert result.outcome == verdict
    if verdict == "failed":
        assert result.error is not None
        assert result.error.startswith("deadline passed") and "HTTP 503" in result.error


def test_a_task_claimed_after_its_deadline_is_not_sent() -> None:
    task = replace(TASK, deadline_at=NOW)
    late = overdue(task, NOW)
    assert late is not None
    assert (late.outcome, late.status_code, late.effect) == ("failed", None, None)
    assert late.error is not None and late.error.startswith("deadline passed")
    assert overdue(task, NOW - timedelta(microseconds=1)) is None
    assert overdue(replace(TASK, deadline_at=None), NOW) is None


def test_the_task_backoffs_bound_the_delay() -> None:
    task = replace(TASK, attempt=10, max_attempts=20, min_backoff=5, max_backoff=7)
    for seed in range(20):
        result = judge(task, answered(500), random.Random(seed))
        assert result.next_run_at is not None
        delay = (result.next_run_at - (NOW + timedelta(seconds=1))).total_seconds()
        assert 5 <= delay <= 7


def test_a_final_outcome_carries_whether_a_callback_follows() -> None:
    with_callback = replace(TASK, capture_response=True)
    assert judge(with_callback, answered(200), random.Random(1)).has_callback
    assert not judge(TASK, answered(200), random.Random(1)).has_callback


@pytest.mark.parametrize("good", [["404"], ["4xx", "5xx"], ["3xx"], [], ["599", "300"]])
def test_check_stop_on_accepts(good: list[str]) -> None:
    assert check_stop_on(good) == tuple(good)


@pytest.mark.parametrize("bad", [["2xx"], ["200"], ["404 "], ["4XX"], ["600"], ["1xx"], ["40"], ["x"], [""]])
def test_check_stop_on_refuses(bad: list[str]) -> None:
    with pytest.raises(ValueError, match="stop_on entry"):
        check_stop_on(bad)


def test_check_stop_on_drops_repeats() -> None:
    assert check_stop_on(["404", "4xx", "404"]) == ("404", "4xx")


def test_an_endpoint_410_disables_it_only_when_stop_on_ends_the_task() -> None:
    endpoint_task = replace(TASK, endpoint_id="ep_x", breaker="ep_x")
    assert judge(endpoint_task, answered(410), random.Random(1)).effect == "gone"
    retried = judge(replace(endpoint_task, stop_on=()), answered(410), random.Random(1))
    assert (retried.outcome, retried.effect) == ("retry", "fail")


@pytest.mark.parametrize("endpoint_id", [None, "ep_x"])
def test_an_answer_stop_on_ends_the_task_on_says_nothing_to_the_breaker(endpoint_id: str | None) -> None:
    task = replace(
        TASK, endpoint_id=endpoint_id, breaker=endpoint_id or "http://127.0.0.1:9", stop_on=("4xx", "503")
    )
    for status in (422, 503):
        result = judge(task, answered(status), random.Random(1))
        assert (result.outcome, result.effect) == ("failed", None)
    retried = judge(task, answered(500), random.Random(1))  # not listed: retried, and counted
    assert (retried.outcome, retried.effect) == ("retry", "fail" if endpoint_id else "ok")


@pytest.mark.parametrize(
    ("status", "attempt", "verdict", "kept"),
    [(500, 1, "retry", 2048), (500, 3, "failed", 100_000), (200, 1, "succeeded", 100_000)],
)
def test_only_a_final_attempt_keeps_a_large_response(
    status: int, attempt: int, verdict: str, kept: int
) -> None:
    """The response a callback hands on is the last attempt's: one to be retried keeps a snippet."""
    task = replace(TASK, capture_response=True, attempt=attempt, max_attempts=3)
    outcome = replace(answered(status), response=b"r" * 100_000)
    result = judge(task, outcome, random.Random(1), kept_on_retry=2048)
    assert (result.outcome, len(result.response)) == (verdict, kept)
    assert len(judge(task, outcome, random.Random(1)).response) == 100_000  # no limit given: all of it
