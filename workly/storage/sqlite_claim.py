"""SQLite's claim: the rules of claim_rules.py over the claim_tasks_* queries.

Runs on the writer thread inside one BEGIN IMMEDIATE transaction, so nothing else
writes while it counts, chooses and marks (SQLite has a single writer).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from workly.models import Claim, ClaimedTask
from workly.storage import claim_rules, rows
from workly.storage.claim_rules import Candidate
from workly.storage.queries import load_queries

_Q = load_queries("sqlite")
_SECOND_US = 1_000_000


def claim(
    db: sqlite3.Connection,
    limit: int,
    now_us: int,
    lease_token: str,
    lease_margin: float,
    decoders: rows.Decoders,
) -> Claim:
    candidates: list[Candidate] = []
    takes: dict[str, int] = {}
    served: dict[tuple[str, str], int] = {}
    buckets: dict[str, tuple[float, float]] = {}  # queue: (rate limit, tokens now)
    for queue in db.execute(_Q.claim_tasks_open_queues).fetchall():
        tokens = _tokens(queue, now_us)
        if tokens is not None:
            buckets[queue["name"]] = (queue["rate_limit"], tokens)
        takes[queue["name"]] = n = claim_rules.take(queue["max_concurrency"], queue["running"], tokens, limit)
        if n > 0:
            candidates += _candidates(db, queue["name"], queue["ordering"], n, now_us, served)
    chosen = claim_rules.choose(candidates, takes, served, limit)
    claimed = _mark(db, chosen, now_us, lease_token, lease_margin, decoders)
    return Claim(tasks=claimed, rate_wait=_spend(db, buckets, chosen, now_us))


def _tokens(queue: sqlite3.Row, now_us: int) -> float | None:
    if queue["rate_limit"] is None:
        return None
    at = queue["rate_at"]
    elapsed = None if at is None else (now_us - at) / _SECOND_US
    return claim_rules.tokens_now(queue["rate_limit"], queue["rate_tokens"], elapsed)


def _candidates(
    db: sqlite3.Connection,
    queue: str,
    ordering: str,
    take: int,
    now_us: int,
    served: dict[tuple[str, str], int],
) -> list[Candidate]:
    params: dict[str, Any] = {"queue": queue, "now": now_us, "limit": take}
    found = [_candidate(row, queue, "p", "") for row in db.execute(_Q.claim_tasks_plain, params)]
    tenants = db.execute(_Q.claim_tasks_tenants, params).fetchall()
    for tenant in tenants:
        if tenant["last_served"] is not None:
            served[(queue, tenant["tenant"])] = tenant["last_served"]
        each = {**params, "tenant": tenant["tenant"], "limit": claim_rules.share(take, len(tenants))}
        found += [
            _candidate(row, queue, "t", tenant["tenant"])
            for row in db.execute(_Q.claim_tasks_by_tenant, each)
        ]
    keys = [row["key"] for row in db.execute(_Q.claim_tasks_keys, params)]
    for key in keys:
        each = {**params, "key": key, "limit": claim_rules.share(take, len(keys))}
        query = _Q.claim_tasks_key_head if ordering == "key" else _Q.claim_tasks_by_key
        found += [_candidate(row, queue, "k", key) for row in db.execute(query, each)]
    return found


def _candidate(row: sqlite3.Row, queue: str, kind: claim_rules.GroupKind, group: str) -> Candidate:
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
        "seqs": json.dumps([c.seq for c in chosen]),
    }
    by_seq = {row["seq"]: row for row in db.execute(_Q.claim_tasks, params)}
    return [rows.claimed_from_row(by_seq[c.seq], decoders, lease_token) for c in chosen]


def _spend(
    db: sqlite3.Connection,
    buckets: dict[str, tuple[float, float]],
    chosen: list[Candidate],
    now_us: int,
) -> float | None:
    """Write the buckets and the tenants' turns; return the wait for the next token."""
    waits = []
    for queue, (rate_limit, tokens) in buckets.items():
        spent = sum(1 for c in chosen if c.queue == queue)
        if spent:
            db.execute(_Q.claim_tasks_spend_tokens, {"queue": queue, "tokens": tokens - spent, "now": now_us})
        wait = claim_rules.rate_wait(rate_limit, tokens - spent)
        if wait is not None:
            waits.append(wait)
    for queue, tenant in sorted({(c.queue, c.group) for c in chosen if c.kind == "t"}):
        db.execute(_Q.claim_tasks_served, {"queue": queue, "tenant": tenant, "now": now_us})
    return min(waits, default=None)
