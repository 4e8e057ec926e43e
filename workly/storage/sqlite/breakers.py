"""SQLite's side of the circuit breakers (workly/breaker.py's rules, applied by
storage/breakers.py): inside the results' transaction; and the probes' release."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from workly.breaker import BreakerRules, BreakerState, after_success
from workly.json_text import to_json
from workly.models import AttemptResult
from workly.storage import breakers, webhook_rows
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import DECODERS, HELD_US, execute, fetchall, fetchone, to_us
from workly.storage.sqlite.webhooks import set_enabled_on

Db = sqlite3.Connection
_q = sqlite_queries


def apply_breakers(db: Db, plan: breakers.BreakerPlan, now_us: int, rules: BreakerRules) -> breakers.Tally:
    """Inside record_results' transaction: close the breakers whose receiver answered
    (freeing what they held), fold failures into the others (holding what they must)."""
    tally = breakers.Tally()
    for row in fetchall(db, _q().lock_breakers, {"keys": to_json(plan.ok_keys)}):
        before = webhook_rows.breaker_from_row(row, DECODERS)
        seen = before.last_success_at
        untouched = before.position == "closed" and before.consecutive_failures == 0
        if untouched and seen is not None and now_us - to_us(seen) < 1_000_000:
            continue  # nothing to change; last_success_at moves on at most once a second
        after = after_success(before, _at(now_us))
        tally.moved(before, after)
        execute(db, _q().save_breaker, _saved(row["key"], after))
        if before.position == "open":
            tally.released += len(fetchall(db, _q().release_held_tasks, {"key": row["key"]}))
    # An endpoint deleted while its delivery ran has no breaker to move, nor anything to disable.
    keys = [key for key in sorted(plan.failing) if _still_there(db, plan.failing[key])]
    if keys:
        execute(db, _q().insert_breakers, {"keys": to_json(keys)})
        for row in fetchall(db, _q().lock_breakers, {"keys": to_json(keys)}):
            key = row["key"]
            before = webhook_rows.breaker_from_row(row, DECODERS)
            verdict = breakers.fold(before, plan.failing[key], rules)
            after = verdict.state
            tally.moved(before, after)
            execute(db, _q().save_breaker, _saved(key, after))
            endpoint_id = plan.failing[key][-1].endpoint_id
            if after.position == "open":
                hold = _q().hold_endpoint_tasks if endpoint_id is not None else _q().hold_origin_tasks
                execute(db, hold, {"key": key, "held_until": HELD_US, "probe_seq": after.probe_seq})
            elif before.position == "open":
                tally.released += len(fetchall(db, _q().release_held_tasks, {"key": key}))
            if (
                verdict.disable_reason is not None
                and endpoint_id is not None
                and set_enabled_on(db, endpoint_id, False, verdict.disable_reason, now_us)
            ):
                tally.disabled.append((endpoint_id, verdict.disable_reason))
    return tally


def _still_there(db: Db, results: list[AttemptResult]) -> bool:
    endpoint_id = results[-1].endpoint_id
    return endpoint_id is None or fetchone(db, _q().lock_endpoint, {"id": endpoint_id}) is not None


def release_probes(db: Db, now_us: int) -> int:
    """Each open breaker whose cool-down is over sends one held task as its probe."""
    released = len(fetchall(db, _q().free_stranded))
    for row in fetchall(db, _q().due_probes, {"now": now_us}):
        probe = fetchone(db, _q().release_probe, {"key": row["key"], "now": now_us})
        if probe is not None:
            execute(db, _q().release_probe_free, {"seq": probe["seq"], "now": now_us})
            execute(db, _q().release_probe_set, {"key": row["key"], "seq": probe["seq"]})
            released += 1
    return released


def _saved(key: str, state: BreakerState) -> dict[str, Any]:
    return webhook_rows.breaker_params(key, state, to_us)


def _at(now_us: int) -> datetime:
    return DECODERS.time(now_us)
