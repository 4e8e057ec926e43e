"""SQLite's claim: the rules of claim_rules.py (the rulebook) over the claim_tasks_* queries.

PostgreSQL's claim statement follows the same rules through SQL functions named after
them (claim_burst, claim_take, … in migration 0006); tests/storage/test_claim_differential.py
holds the two claims to the same tasks, in the same order, with the same rate_wait and more.

Runs on the writer thread inside one BEGIN IMMEDIATE transaction, so nothing else
writes while it counts, chooses and marks (SQLite has a single writer).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from workly.json_text import to_json
from workly.models import Claim, ClaimedTask
from workly.storage import claim_rules, rows
from workly.storage.claim_rules import Candidate
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import SqliteRow, fetchall

_q = sqlite_queries  # loaded at the first call, then cached
_SECOND_US = 1_000_000


@dataclass
class _Budget:
    """One open queue during a claim."""

    name: str
    ordering: str
    room: int  # max_concurrency minus the deliveries in flight
    rate_limit: float | None
    tokens: float | None  # the bucket now, before this claim spends from it
    rate_at: int | None
    take: int
    filled_shares: bool = False  # a tenant or key gave its whole share: it may hold more
    served: dict[tuple[str, str], int] = field(default_factory=dict)


def claim(
    db: sqlite3.Connection,
    limit: int,
    now_us: int,
    lease_token: str,
    lease_margin: float,
    decoders: rows.Decoders,
) -> Claim:
    budgets = [_budget(queue, now_us, limit) for queue in fetchall(db, _q().claim_tasks_open_queues)]
    candidates: list[Candidate] = []
    served: dict[tuple[str, str], int] = {}
    for budget in budgets:
        if budget.take > 0:
            candidates += _candidates(db, budget, now_us)
            served.update(budget.served)
    chosen = claim_rules.choose(candidates, {b.name: b.take for b in budgets}, served, limit)
    claimed = _mark(db, chosen, now_us, lease_token, lease_margin, decoders)
    spent = {b.name: sum(1 for c in chosen if c.queue == b.name) for b in budgets}
    _record_turns(db, chosen, now_us)
    return Claim(
        tasks=claimed,
        rate_wait=_spend_tokens(db, budgets, spent, now_us),
        more=any(spent[b.name] < b.take and b.filled_shares for b in budgets),
    )


def _budget(queue: SqliteRow, now_us: int, limit: int) -> _Budget:
    tokens = None
    if queue["rate_limit"] is not None:
        at = queue["rate_at"]
        elapsed = None if at is None else (now_us - at) / _SECOND_US
        tokens = claim_rules.tokens_now(queue["rate_limit"], queue["rate_tokens"], elapsed)
    return _Budget(
        name=queue["name"],
        ordering=queue["ordering"],
        room=queue["max_concurrency"] - queue["running"],
        rate_limit=queue["rate_limit"],
        tokens=tokens,
        rate_at=queue["rate_at"],
        take=claim_rules.take(queue["max_concurrency"], queue["running"], tokens, limit),
    )


def _candidates(db: sqlite3.Connection, budget: _Budget, now_us: int) -> list[Candidate]:
    queue, take = budget.name, budget.take
    due = {"queue": queue, "now": now_us}
    found = [
        _candidate(row, queue, "p", "")
        for row in fetchall(db, _q().claim_tasks_plain, {**due, "limit": take})
    ]
    tenants = fetchall(db, _q().claim_tasks_tenants, {"queue": queue})
    for tenant in tenants:
        if tenant["last_served"] is not None:
            budget.served[(queue, tenant["tenant"])] = tenant["last_served"]
        share = claim_rules.share(take, len(tenants))
        got = fetchall(db, _q().claim_tasks_by_tenant, {**due, "tenant": tenant["tenant"], "limit": share})
        found += _group(budget, [_candidate(row, queue, "t", tenant["tenant"]) for row in got], share)
    keys = [row["key"] for row in fetchall(db, _q().claim_tasks_keys, {"queue": queue})]
    for key in keys:
        if budget.ordering == "key":
            head = fetchall(db, _q().claim_tasks_key_head, {**due, "key": key})
            found += [_candidate(row, queue, "k", key) for row in head]
        else:
            share = claim_rules.share(take, len(keys))
            got = fetchall(db, _q().claim_tasks_by_key, {**due, "key": key, "limit": share})
            found += _group(budget, [_candidate(row, queue, "k", key) for row in got], share)
    return found


def _group(budget: _Budget, members: list[Candidate], share: int) -> list[Candidate]:
    if len(members) >= share:
        budget.filled_shares = True
    return members


def _candidate(row: SqliteRow, queue: str, kind: claim_rules.GroupKind, group: str) -> Candidate:
    return Candidate(row["seq"], queue, kind, group, row["priority"], row["run_at"])


def _mark(
    db: sqlite3.Connection,
    chosen: list[Candidate],
    now_us: int,
    lease_token: str,
    lease_margin: float,
    decoders: rows.Decoders,
) -> list[ClaimedTask]:
    if not chosen:
        return []
    params = {
        "now": now_us,
        "lease_token": lease_token,
        "lease_margin": lease_margin,
        "seqs": to_json([c.seq for c in chosen]),
    }
    by_seq = {row["seq"]: row for row in fetchall(db, _q().claim_tasks, params)}
    return [rows.claimed_from_row(by_seq[c.seq], decoders, lease_token) for c in chosen]


def _record_turns(db: sqlite3.Connection, chosen: list[Candidate], now_us: int) -> None:
    for queue, tenant in sorted({(c.queue, c.group) for c in chosen if c.kind == "t"}):
        fetchall(db, _q().claim_tasks_served, {"queue": queue, "tenant": tenant, "now": now_us})


def _spend_tokens(
    db: sqlite3.Connection, budgets: list[_Budget], spent: dict[str, int], now_us: int
) -> float | None:
    """Write the buckets; return the wait for the next token of a queue that has room."""
    waits = []
    for b in budgets:
        if b.rate_limit is None or b.tokens is None:
            continue
        left = b.tokens - spent[b.name]
        if spent[b.name]:
            at = now_us if b.rate_at is None else max(b.rate_at, now_us)  # never backwards
            fetchall(db, _q().claim_tasks_spend_tokens, {"queue": b.name, "tokens": left, "now": at})
        wait = claim_rules.rate_wait(b.rate_limit, left)
        if wait is not None and spent[b.name] < b.room:
            waits.append(wait)
    return min(waits, default=None)
