"""How a batch of attempt results moves the breakers, shared by both backends.

The backends record the results, then apply this plan in the same transaction (SQLite)
or right after the results' statement (PostgreSQL, whose results statement closes the
breakers of receivers that answered by itself: the hot path stays one statement).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from workly.breaker import BreakerRules, BreakerState, after_failure, after_success, overdue_for_disabling
from workly.models import AttemptResult

GONE_REASON = "the endpoint answered 410 Gone"


@dataclass
class BreakerPlan:
    """The batch's word on breakers: ``ok_keys`` answered last (each closes); ``failing``
    had a failure as their last word (each is folded through the rules)."""

    ok_keys: list[str] = field(default_factory=list)
    failing: dict[str, list[AttemptResult]] = field(default_factory=dict)


def plan(results: Sequence[AttemptResult]) -> BreakerPlan:
    by_key: dict[str, list[AttemptResult]] = {}
    for result in results:
        if result.breaker is not None and result.effect is not None:
            by_key.setdefault(result.breaker, []).append(result)
    out = BreakerPlan()
    for key, found in sorted(by_key.items()):
        found.sort(key=lambda r: r.finished_at)
        if found[-1].effect == "ok":
            out.ok_keys.append(key)
        else:
            out.failing[key] = found
    return out


@dataclass
class Tally:
    """What applying a batch's results did to the breakers (RecordSummary's share)."""

    released: int = 0  # held tasks freed
    opened: int = 0
    closed: int = 0
    disabled: list[tuple[str, str]] = field(default_factory=list)  # (endpoint id, reason)

    def moved(self, before: BreakerState, after: BreakerState) -> None:
        if before.position == "closed" and after.position == "open":
            self.opened += 1
        elif before.position == "open" and after.position == "closed":
            self.closed += 1


@dataclass(frozen=True, slots=True)
class Verdict:
    state: BreakerState
    disable_reason: str | None  # an endpoint to disable, and why


def fold(state: BreakerState, results: Sequence[AttemptResult], rules: BreakerRules) -> Verdict:
    """Apply one breaker's results, oldest first; say whether its endpoint must be disabled."""
    reason = None
    for result in results:
        if result.effect == "ok":
            state = after_success(state, result.finished_at)
        else:
            state = after_failure(state, result.task_seq, result.finished_at, rules)
            if result.effect == "gone":
                reason = GONE_REASON
    last = results[-1]
    if (
        reason is None
        and last.endpoint_id is not None
        and overdue_for_disabling(state, last.finished_at, rules)
    ):
        reason = (
            f"no successful delivery for {_duration(rules.disable_after)} (WORKLY_ENDPOINT_DISABLE_AFTER)"
        )
    return Verdict(state, reason if last.endpoint_id is not None else None)


def _duration(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g} days"
    return f"{seconds:g} seconds"
