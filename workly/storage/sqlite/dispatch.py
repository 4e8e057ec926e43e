"""SQLite's dispatch (DispatchStore): the claim (claim.py), the attempt results with the
breaker rules, the heartbeat; all bookkeeping writes (synchronous=NORMAL at most)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from workly.breaker import BreakerRules
from workly.json_text import to_json
from workly.models import AttemptResult, Claim, RecordSummary
from workly.storage import breakers
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.breakers import apply_breakers
from workly.storage.sqlite.claim import claim
from workly.storage.sqlite.statements import DECODERS, HELD_US, Connections, execute_many, fetchall, to_us

Db = sqlite3.Connection
_q = sqlite_queries


@raises_workly_errors(interpret_sqlite_error)
class SqliteDispatch:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._bookkeeping = db.bookkeeping

    async def claim_tasks(self, limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        return await self._writer.transaction(
            self._bookkeeping, claim, limit, to_us(now), lease_token, lease_margin, DECODERS
        )

    async def record_results(
        self, results: Sequence[AttemptResult], now: datetime, rules: BreakerRules = BreakerRules()
    ) -> RecordSummary:
        if not results:
            return RecordSummary(accepted=0, stale=0)
        return await self._writer.transaction(self._bookkeeping, _record, results, to_us(now), rules)

    async def extend_leases(
        self, leases: Sequence[tuple[int, str]], now: datetime, lease_margin: float
    ) -> set[tuple[int, str]]:
        if not leases:
            return set()
        params = {"now": to_us(now), "lease_margin": lease_margin, "leases": to_json(list(leases))}
        extended = await self._writer.transaction(self._bookkeeping, fetchall, _q().extend_leases, params)
        return {(row["seq"], row["lease_token"]) for row in extended}

    async def extend_lease(self, seq: int, lease_token: str, now: datetime, lease_margin: float) -> bool:
        # One writer and no row locks: the heartbeat's statement skips nothing here.
        return (seq, lease_token) in await self.extend_leases([(seq, lease_token)], now, lease_margin)


def _record(db: Db, results: Sequence[AttemptResult], now_us: int, rules: BreakerRules) -> RecordSummary:
    payload = to_json(
        [
            {
                "task_seq": r.task_seq,
                "lease_token": r.lease_token,
                "outcome": r.outcome,
                "next_run_at": None if r.next_run_at is None else to_us(r.next_run_at),
                "status_code": r.status_code,
                "error": r.error,
                "sent": r.sent,
            }
            for r in results
        ]
    )
    plan = breakers.plan(results)
    params = {"results": payload, "now": now_us, "ok_keys": to_json(plan.ok_keys), "held_until": HELD_US}
    accepted = _accepted(db, results, params)
    execute_many(
        db,
        _q().record_results_attempts,
        [
            {
                "task_seq": r.task_seq,
                "attempt": r.attempt,
                "started_at": to_us(r.started_at),
                "finished_at": to_us(r.finished_at),
                "status_code": r.status_code,
                "error": r.error,
                "response": r.response,
                "stale": (r.task_seq, r.lease_token) not in accepted,
            }
            for r in results
            if r.sent
        ],
    )
    stale = sum(1 for r in results if (r.task_seq, r.lease_token) not in accepted)
    tally = apply_breakers(db, plan, now_us, rules)
    return RecordSummary(
        accepted=len(results) - stale, stale=stale, released=tally.released, disabled=tuple(tally.disabled),
        opened=tally.opened, closed=tally.closed,
    )  # fmt: skip


def _accepted(db: Db, results: Sequence[AttemptResult], params: Mapping[str, Any]) -> set[tuple[int, str]]:
    """Run record_results; the (task seq, lease token) pairs it accepted. Only a batch with
    two results of one task (a stale one, and the current one of the claim the reaper gave
    it to meanwhile) needs the current leases read first to tell them apart."""
    seqs = [r.task_seq for r in results]
    current = None
    if len(set(seqs)) < len(seqs):
        found = fetchall(db, _q().record_results_leases, {"seqs": to_json(seqs)})
        current = {(row["seq"], row["lease_token"]) for row in found}
    updated = {row["seq"] for row in fetchall(db, _q().record_results, params)}
    if current is None:
        return {(r.task_seq, r.lease_token) for r in results if r.task_seq in updated}
    return {(seq, token) for seq, token in current if seq in updated}
