"""The claim's rulebook: how much a queue may take, and in what order.

Both backends follow these rules. SQLite's claim (sqlite/claim.py) calls these functions.
PostgreSQL's claim statement (postgres/sql/core.sql, claim_tasks) calls SQL functions of the
same names and arithmetic (migrations/postgres/repeatable/claim_rules.sql): ``claim_burst``,
``claim_tokens_now``, ``claim_take``, ``claim_share``, ``claim_rate_wait``; and its window
functions order the candidates as ``choose`` does. tests/storage/test_claim_differential.py
checks each SQL function against its Python twin, and both whole claims against each other
over random queues and backlogs: a rule changed on one side alone fails it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

GroupKind = Literal["p", "t", "k"]  # plain (no tenant, no key), tenant, key


def burst(rate_limit: float) -> float:
    """A rate-limited queue may dispatch a tenth of a second's worth at once, at least one."""
    return max(1.0, rate_limit / 10)


def tokens_now(rate_limit: float, tokens: float | None, elapsed: float | None) -> float:
    """The bucket after ``elapsed`` seconds of refill; a bucket never used starts full."""
    if tokens is None or elapsed is None:
        return burst(rate_limit)
    return min(burst(rate_limit), tokens + rate_limit * max(0.0, elapsed))


def take(max_concurrency: int, running: int, tokens: float | None, limit: int) -> int:
    """How many tasks a queue may have claimed now."""
    allowed = min(max_concurrency - running, limit)
    if tokens is not None:
        allowed = min(allowed, math.floor(tokens))
    return max(0, allowed)


def share(take: int, groups: int) -> int:
    """How many candidates to read per group (tenant or key) so ``take`` can be filled."""
    return -(-take // min(groups, take))  # the ceiling, in integers


def rate_wait(rate_limit: float, tokens_left: float) -> float | None:
    """Seconds until a drained bucket holds a whole token again."""
    return (1 - tokens_left) / rate_limit if tokens_left < 1 else None


@dataclass(frozen=True, slots=True)
class Candidate:
    seq: int
    queue: str
    kind: GroupKind
    group: str  # the tenant or the key; "" for plain tasks
    priority: int
    run_at: int  # microseconds


def choose(
    candidates: Sequence[Candidate],
    takes: Mapping[str, int],
    last_served: Mapping[tuple[str, str], int],
    limit: int,
) -> list[Candidate]:
    """Order each queue's candidates in rounds, keep its take, interleave the queues.

    Round n holds each group's n-th best task (priority high first, then run_at, then
    enqueue order); within a round, higher priority first, then tenants least recently
    served (never served first). Queues are interleaved by their place in that order, so
    a queue with a deep backlog gets no more turns than one with a single task.
    """
    groups: dict[tuple[str, GroupKind, str], list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        groups[(candidate.queue, candidate.kind, candidate.group)].append(candidate)
    by_queue: dict[str, list[tuple[tuple[int, int, int, int, int, int], Candidate]]] = defaultdict(list)
    for (queue, kind, group), members in groups.items():
        members.sort(key=lambda c: (-c.priority, c.run_at, c.seq))
        served = last_served.get((queue, group)) if kind == "t" else None
        for round_, c in enumerate(members, start=1):
            never = served is None
            order = (round_, -c.priority, 0 if never else 1, served or 0, c.run_at, c.seq)
            by_queue[queue].append((order, c))
    placed: list[tuple[tuple[int, int, int, int], Candidate]] = []
    for queue, ranked in by_queue.items():
        ranked.sort(key=lambda pair: pair[0])
        for place, (_, c) in enumerate(ranked[: takes.get(queue, 0)], start=1):
            placed.append(((place, -c.priority, c.run_at, c.seq), c))
    placed.sort(key=lambda pair: pair[0])
    return [c for _, c in placed[:limit]]
