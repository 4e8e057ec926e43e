"""The line each judged attempt leaves in the log, and its facts as fields for JSON logs."""

from __future__ import annotations

import logging

from workly.dispatch.policy import DeliveryOutcome
from workly.models import AttemptResult, ClaimedTask

log = logging.getLogger("workly.dispatch")


def log_attempt(
    level: int, task: ClaimedTask, outcome: DeliveryOutcome, result: AttemptResult, seconds: float
) -> None:
    log.log(
        level,
        "attempt task=%s queue=%s attempt=%d status=%s outcome=%s duration_ms=%.1f%s",
        task.id,
        task.queue,
        task.attempt,
        outcome.status_code if outcome.status_code is not None else "-",
        result.outcome,
        seconds * 1000,
        f" error={result.error!r}" if result.error and outcome.status_code is None else "",
        extra={"fields": attempt_fields(task, outcome, result, seconds)},
    )


def attempt_fields(
    task: ClaimedTask, outcome: DeliveryOutcome, result: AttemptResult, seconds: float
) -> dict[str, object]:
    """The attempt line's facts as fields, for JSON logs."""
    return {
        "event": "attempt",
        "task": task.id,
        "queue": task.queue,
        "attempt": task.attempt,
        "status": outcome.status_code,
        "outcome": result.outcome,
        "duration_ms": round(seconds * 1000, 1),
        "error": result.error,
    }
