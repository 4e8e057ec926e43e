"""Vacuum: on PostgreSQL a task leaves three row versions behind (ready, running,
finished). Until they are vacuumed, their index entries stay in front of the claim's
index scan, so every claim gets slower with every task delivered (measured: 0.3 ms →
12 ms after 40,000 tasks, docs/performance.md). Autovacuum normally handles it (the
migration tunes it for the tasks table); when the server runs with autovacuum off, Workly
vacuums its own tables."""

from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger("workly.housekeeping")


class AutovacuumCheck(Protocol):
    """Whether the database vacuums by itself (a Database has it)."""

    async def needs_vacuum(self) -> bool: ...


class Vacuumer(Protocol):
    """The vacuum itself (an UpkeepStore has it)."""

    async def vacuum(self) -> None: ...


class Vacuum:
    name = "vacuum"

    def __init__(
        self, store: Vacuumer, database: AutovacuumCheck, setting: float | None, auto_every: float = 10.0
    ) -> None:
        """``setting``: seconds between vacuums; 0 = never; None = every ``auto_every``
        seconds if the database does not vacuum by itself (WORKLY_VACUUM_INTERVAL)."""
        self._store = store
        self._database = database
        self._setting = setting
        self._auto_every = auto_every
        self.vacuums = 0

    async def interval(self) -> float:
        if self._setting is not None:
            return self._setting
        if not await self._database.needs_vacuum():
            return 0
        log.warning(
            "PostgreSQL autovacuum is off: Workly vacuums its tables every %.0fs "
            "(turn autovacuum on, or set WORKLY_VACUUM_INTERVAL)",
            self._auto_every,
        )
        return self._auto_every

    async def run(self) -> None:
        await self._store.vacuum()
        self.vacuums += 1
