"""PostgreSQL's dispatch (DispatchStore): the claim with FOR UPDATE SKIP LOCKED, the attempt
results with the breaker rules, the heartbeat."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from workly.breaker import HELD_UNTIL, BreakerRules
from workly.errors import StorageError
from workly.models import AttemptResult, Claim, RecordSummary
from workly.storage import breakers, rows
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.breakers import apply_failures, release_held
from workly.storage.postgres.statements import DECODERS, Connections, fetch, fetchrow, retrying_contention

log = logging.getLogger("workly.storage")


@raises_workly_errors(interpret_postgres_error)
class PostgresDispatch:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def claim_tasks(self, limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        params: dict[str, Any] = {
            "now": now, "limit": limit, "lease_token": lease_token, "lease_margin": lease_margin,
        }  # fmt: skip
        # Claims lock the same queue rows in every process: one PostgreSQL aborted to break a
        # deadlock runs again at once, not a poll interval later.
        found = await retrying_contention(lambda: fetch(self._pool, self._q.claim_tasks, **params))
        # One row carries no task (seq is null): when to claim again.
        [hint] = [row for row in found if row["seq"] is None]
        claimed = sorted((row for row in found if row["seq"] is not None), key=_placed)
        return Claim(
            tasks=[rows.claimed_from_row(row, DECODERS, lease_token) for row in claimed],
            rate_wait=hint["wait"],
            more=hint["more"],
        )

    async def record_results(
        self, results: Sequence[AttemptResult], now: datetime, rules: BreakerRules = BreakerRules()
    ) -> RecordSummary:
        if not results:
            return RecordSummary(accepted=0, stale=0)
        # The batch's last word per breaker (stale results too: the receiver did answer, or
        # fail). A receiver that answered is closed by the results statement itself;
        # failures go through the breaker rules right after it.
        plan = breakers.plan(results)
        params: dict[str, Any] = {
            "now": now,
            "task_seqs": [r.task_seq for r in results],
            "lease_tokens": [r.lease_token for r in results],
            "attempts": [r.attempt for r in results],
            "started_ats": [r.started_at for r in results],
            "finished_ats": [r.finished_at for r in results],
            "status_codes": [r.status_code for r in results],
            "errors": [r.error for r in results],
            "responses": [r.response for r in results],
            "outcomes": [r.outcome for r in results],
            "next_run_ats": [r.next_run_at for r in results],
            "sents": [r.sent for r in results],
            "ok_keys": plan.ok_keys,
            "held_until": HELD_UNTIL,
        }

        async def record() -> tuple[Any, breakers.Tally]:
            async with self._pool.acquire() as conn:
                if not plan.failing:  # the hot path: one statement
                    return await fetchrow(conn, self._q.record_results, **params), breakers.Tally()
                # The rare path: the results and the breaker rules in one transaction.
                async with conn.transaction():
                    recorded = await fetchrow(conn, self._q.record_results, **params)
                    return recorded, await apply_failures(conn, self._q, plan.failing, now, rules)

        # Run again whole when PostgreSQL broke a deadlock with it (another process's
        # breaker rules on the same receiver): otherwise the results are lost and the
        # tasks delivered again once their leases expire.
        recorded, tally = await retrying_contention(record)
        closed = recorded["closed_keys"]
        if closed:
            tally.closed += len(closed)
            tally.released += await self._free_closed(closed)
        accepted: int = recorded["accepted"]
        return RecordSummary(
            accepted=accepted, stale=len(results) - accepted, released=tally.released,
            disabled=tuple(tally.disabled), opened=tally.opened, closed=tally.closed,
        )  # fmt: skip

    async def _free_closed(self, closed: Sequence[str]) -> int:
        """Free what the breakers that closed held: after the results' commit, so a failure
        here must not fail the call (its caller would then record the results again). What
        stays held is freed by the probes' sweep (free_stranded)."""
        try:
            async with self._pool.acquire() as conn:
                return await release_held(conn, self._q, closed)
        except Exception as exc:
            if not isinstance(exc, StorageError) and interpret_postgres_error(exc) is None:
                raise  # not the database's: a programming error
            log.warning(
                "freeing the tasks of %d closed breaker(s) failed (%s); the sweep will", len(closed), exc
            )
            return 0

    async def extend_leases(
        self, leases: Sequence[tuple[int, str]], now: datetime, lease_margin: float
    ) -> set[tuple[int, str]]:
        if not leases:
            return set()
        params: dict[str, Any] = {
            "now": now, "lease_margin": lease_margin, "seqs": [seq for seq, _ in leases],
            "lease_tokens": [token for _, token in leases],
        }  # fmt: skip
        extended = await retrying_contention(lambda: fetch(self._pool, self._q.extend_leases, **params))
        return {(row["seq"], row["lease_token"]) for row in extended}

    async def extend_lease(self, seq: int, lease_token: str, now: datetime, lease_margin: float) -> bool:
        params: dict[str, Any] = {
            "seq": seq, "lease_token": lease_token, "now": now, "lease_margin": lease_margin,
        }  # fmt: skip
        extended = await retrying_contention(lambda: fetch(self._pool, self._q.extend_lease, **params))
        return bool(extended)


def _placed(row: asyncpg.Record) -> tuple[int, int, datetime, int]:
    """The claim's order across queues (claim_rules.choose): place, priority, run_at, seq."""
    return (row["place"], -row["priority"], row["run_at"], row["seq"])
