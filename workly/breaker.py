"""The circuit breaker's rules: pure functions over one breaker's state.

A breaker counts consecutive failed attempts to one receiver: an endpoint (every failed
attempt counts), or, for plain tasks, a destination origin (only the signs of an origin in
trouble count: no connection, a timeout, 429, 502, 503, 504). At ``threshold`` it opens:
the receiver's ready tasks are held (not attempted, no attempt spent) until ``probe_at``;
then one task is released as the probe. The probe's success closes the breaker and frees
the held tasks; its failure reopens it with the cool-down doubled, up to ``max_cooldown``.
Any success closes it. Both backends apply these rules with the recording of the attempts
(storage/breakers.py; docs/webhooks.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

BreakerPosition = Literal["closed", "open"]
MAX_COOLDOWN = 3600.0


@dataclass(frozen=True, slots=True)
class BreakerRules:
    threshold: int = 5
    cooldown: float = 30.0
    max_cooldown: float = MAX_COOLDOWN
    # An endpoint that has failed without one success for this long is disabled.
    disable_after: float = 5 * 86400


@dataclass(frozen=True, slots=True)
class BreakerState:
    position: BreakerPosition = "closed"
    consecutive_failures: int = 0
    failing_since: datetime | None = None
    last_success_at: datetime | None = None
    probe_at: datetime | None = None  # open: when a probe may go
    probe_seq: int | None = None  # open: the task released as the probe, while it is out
    cooldown: float | None = None  # open: the cool-down that set probe_at


def after_success(state: BreakerState, at: datetime) -> BreakerState:
    return BreakerState(last_success_at=at)


def after_failure(state: BreakerState, task_seq: int, at: datetime, rules: BreakerRules) -> BreakerState:
    failures = state.consecutive_failures + 1
    failing = replace(state, consecutive_failures=failures, failing_since=state.failing_since or at)
    if state.position == "closed":
        if failures >= rules.threshold:
            return _open(failing, at, min(rules.cooldown, rules.max_cooldown))
        return failing
    if task_seq == state.probe_seq:  # the probe failed: wait twice as long
        return _open(failing, at, min((state.cooldown or rules.cooldown) * 2, rules.max_cooldown))
    return failing  # an attempt that started before the breaker opened


def _open(state: BreakerState, at: datetime, cooldown: float) -> BreakerState:
    return replace(
        state, position="open", cooldown=cooldown, probe_at=at + timedelta(seconds=cooldown), probe_seq=None
    )


def overdue_for_disabling(state: BreakerState, at: datetime, rules: BreakerRules) -> bool:
    """An endpoint failing without a success for ``disable_after`` seconds is disabled."""
    return (
        state.failing_since is not None
        and state.consecutive_failures > 0
        and (at - state.failing_since).total_seconds() >= rules.disable_after
    )


# A held task's run_at: no claim reaches it. held_run_at keeps when it was due.
HELD_UNTIL = datetime(9999, 1, 1, tzinfo=UTC)
