"""PostgreSQL's side of the circuit breakers (workly/breaker.py's rules, applied by
storage/breakers.py): inside the results' transaction, on its connection."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from workly.breaker import HELD_UNTIL, BreakerRules
from workly.models import AttemptResult
from workly.storage import breakers, webhook_rows
from workly.storage.postgres.statements import DECODERS, Connection, execute, fetch, fetchrow
from workly.storage.postgres.webhooks import set_enabled_on
from workly.storage.queries import PostgresQueries


async def apply_failures(
    conn: Connection,
    q: PostgresQueries,
    failing: dict[str, list[AttemptResult]],
    now: datetime,
    rules: BreakerRules,
) -> breakers.Tally:
    """Fold the failures into their breakers (rows locked in key order), hold the tasks of
    breakers that are open, disable endpoints the rules say must go: inside record_results'
    transaction, on its connection."""
    tally = breakers.Tally()
    # An endpoint deleted while its delivery ran has no breaker to move, nor anything to
    # disable. Endpoints are locked first, as set_endpoint_enabled and delete_endpoint lock
    # them (then the breaker), so the two orders cannot deadlock.
    keys = [key for key in sorted(failing) if await _still_there(conn, q, failing[key])]
    if not keys:
        return tally
    await execute(conn, q.insert_breakers, keys=keys)
    for row in await fetch(conn, q.lock_breakers, keys=keys):
        before = webhook_rows.breaker_from_row(row, DECODERS)
        verdict = breakers.fold(before, failing[row["key"]], rules)
        after = verdict.state
        tally.moved(before, after)
        await execute(conn, q.save_breaker, **webhook_rows.breaker_params(row["key"], after, _same))
        endpoint_id = failing[row["key"]][-1].endpoint_id
        if after.position == "open":
            hold = q.hold_endpoint_tasks if endpoint_id is not None else q.hold_origin_tasks
            await execute(conn, hold, key=row["key"], held_until=HELD_UNTIL, probe_seq=after.probe_seq)
        elif before.position == "open":
            tally.released += len(await fetch(conn, q.release_held_tasks, key=row["key"]))
        if (
            verdict.disable_reason is not None
            and endpoint_id is not None
            and await set_enabled_on(conn, q, endpoint_id, False, verdict.disable_reason, now)
        ):
            tally.disabled.append((endpoint_id, verdict.disable_reason))
    return tally


async def _still_there(conn: Connection, q: PostgresQueries, results: list[AttemptResult]) -> bool:
    endpoint_id = results[-1].endpoint_id
    return endpoint_id is None or await fetchrow(conn, q.lock_endpoint, id=endpoint_id) is not None


async def release_held(conn: Connection, q: PostgresQueries, keys: Sequence[str]) -> int:
    """Free what the breakers of ``keys`` held, each in a statement of its own: run after the
    breaker closed, it sees every task held before that."""
    return sum([len(await fetch(conn, q.release_held_tasks, key=key)) for key in keys])


def _same(value: datetime) -> datetime:
    return value
