"""Periodic upkeep (workly/service/upkeep/): the reaper, breaker probes, the kept
counts, vacuum and index rebuilds. Every method is safe in several processes at once."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class UpkeepStore(Protocol):
    async def reap_expired(self, now: datetime, limit: int = 1000) -> int:
        """Return running tasks whose lease expired before ``now`` to ready (due now), or
        fail them when that attempt was their last; record each as an attempt ending in
        "lease expired". Returns how many."""

    async def recount_running(self) -> int:
        """Set each queue's count of deliveries in flight from the tasks themselves, where a
        backend keeps such a counter; return how many queues were corrected."""

    async def release_probes(self, now: datetime) -> int:
        """For each open breaker whose cool-down is over and that has no probe out, make one
        held task (the first by priority, then due time) due now as its probe. Returns how
        many were released."""

    # Tasks per queue and status come from a table triggers keep (migration 0014), so
    # get_queue and list_queues do not count the tasks table.
    async def fold_task_counts(self) -> None:
        """Tidy the kept counts (PostgreSQL: fold the rows appended per statement into one
        per queue and status; SQLite: drop zeros)."""

    async def miscounted_queues(self) -> list[str]:
        """The queues whose kept counts differ from their tasks (a write that fired no
        trigger: triggers disabled, a restore); reads the whole tasks table (for doctor)."""

    async def recount_tasks(self) -> None:
        """Replace the kept counts by a count of the tasks (writers wait meanwhile)."""

    async def vacuum(self) -> None:
        """Remove dead row versions from the hot tables (PostgreSQL VACUUM; SQLite: nothing)."""

    async def rebuild_bloated_indexes(self) -> list[str]:
        """Rebuild the indexes of the churning tables that retention has left much larger
        than their entries need, in one process at a time; their names (PostgreSQL, see
        storage/postgres/indexes.py; SQLite: none, its B-trees merge pages that deletes
        leave underfull)."""
