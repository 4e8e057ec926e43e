"""What the dispatcher needs: claim due tasks under a lease, record their outcomes, keep the
leases of live deliveries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from workly.breaker import BreakerRules
from workly.models import AttemptResult, Claim, RecordSummary


class DispatchStore(Protocol):
    async def claim_tasks(self, limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        """Claim up to ``limit`` due tasks from unpaused queues, as one atomic step.

        Every queue rule holds across all processes sharing the database (docs/queues.md):
        no queue gets more tasks in flight than its ``max_concurrency``, or more per
        second than its ``rate_limit`` (bursts of a tenth of a second's worth, at least
        one); in an ``ordering: key`` queue a key's oldest unfinished task is the only one
        claimable, and only while none of the key runs; within a queue, tasks are taken in
        rounds over groups (untenanted tasks, each tenant least recently served first, each
        key), each group's in priority (high first), run_at, enqueue order; queues are
        interleaved round by round. Claimed tasks become ``running`` with ``attempts``
        incremented and a lease until now + timeout + lease_margin under ``lease_token``.
        """

    async def record_results(
        self, results: Sequence[AttemptResult], now: datetime, rules: BreakerRules = BreakerRules()
    ) -> RecordSummary:
        """Record attempt outcomes in one transaction.

        A result whose lease token no longer matches a running task is refused (stale):
        its attempt is still kept, marked stale, and the task is left as it is.

        Each accepted result's ``effect`` moves its breaker (workly/breaker.py, ``rules``):
        a breaker that opens holds its receiver's ready tasks (and any enqueued while it is
        open) without spending attempts; one that closes frees them (``released``). An
        endpoint that answered 410, or has failed without a success for
        ``rules.disable_after``, is disabled (``disabled``).
        """

    async def extend_leases(
        self, leases: Sequence[tuple[int, str]], now: datetime, lease_margin: float
    ) -> set[tuple[int, str]]:
        """The heartbeat: for each (task seq, lease token) still held, move the lease's expiry
        to now + the task's timeout + ``lease_margin``, in one statement. Returns the leases
        it extended: the dispatcher renews its own deadline for those only (a seq alone could
        name a task this process claimed again under a new lease after losing the old one)."""

    async def extend_lease(self, seq: int, lease_token: str, now: datetime, lease_margin: float) -> bool:
        """One lease, extended as ``extend_leases`` extends it: whether it was still held.
        Unlike the heartbeat, it waits for the task's row when a heartbeat or a result holds
        it, rather than skipping it: its caller acts on the answer (a result to try again, a
        lapsed lease to send under), and a skipped task is not a lost lease."""
