"""The local side of a lease: until when this process may still write a claimed task's request.

A lease ends at the wall-clock ``now`` its claim (or the heartbeat's last renewal) passed to
the database, plus the attempt's timeout and the lease margin. Once it has passed, the
reaper of any process gives the task back, and another process may deliver it, or the next
task of its ordering key. A process that was stopped (SIGSTOP, a stalled virtual machine)
or kept waiting (for a free slot, for a connection) may still hold such a task when it goes
on; sending it then puts a request in front of the receiver that nothing fences any more:
two deliveries of one key at once, out of order (issue 40).

So each claimed task carries a deadline on the process's own monotonic clock, counted from a
reading taken *before* the claim (or renewal) read its ``now``: the lease began no earlier,
so the deadline is never later than the database's, whatever the process went through in
between. The request is written only before it (``Dispatcher._deliver`` checks when the
delivery starts, and the HTTP client again right before it writes: a connection may take
long). The deadline leaves the attempt its whole timeout inside the lease: a request written
in time is over, answered or timed out, before the lease ends, even if the process stops
right after writing it and no heartbeat renews anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from workly.clock import Clock
from workly.errors import StorageUnavailable
from workly.models import ClaimedTask
from workly.storage.contract import DispatchStore

# Of the lease margin, kept back from the deadline for the wall clocks of the processes that
# share a database disagreeing (each reaper judges a lease by its own). Half a heartbeat
# interval (margin/3): a heartbeat that renews on time keeps the deadline about half a
# margin ahead, so only a process that stopped or lost its database ever reaches it.
GUARD = 1 / 6


def send_by(since: float, lease_margin: float) -> float:
    """The last monotonic instant a request may be written under a lease taken or renewed at
    ``since``: the lease's end (since + timeout + margin) less the attempt's timeout and the
    guard. It does not depend on the task: one per claim, one per heartbeat."""
    return since + lease_margin * (1 - GUARD)


@dataclass(slots=True, eq=False)
class Lease:
    """A claimed task held by this process, and the deadline for writing its request."""

    task: ClaimedTask
    send_by: float

    def renewed(self, since: float, lease_margin: float) -> None:
        """The database extended the lease from a ``now`` read after ``since``."""
        self.send_by = max(self.send_by, send_by(since, lease_margin))

    def lapsed(self, now: float) -> bool:
        """Whether the lease may have ended before a request written at ``now`` would be over."""
        return now >= self.send_by


async def extend_in_database(
    store: DispatchStore, task: ClaimedTask, clock: Clock, lease_margin: float, deadline: float | None = None
) -> bool | None:
    """Extend ``task``'s lease in the database: True when it was still held (it now runs on
    from this ``now``), False when not (reaped, claimed again, its result recorded), None when
    the database did not answer (by ``deadline``, monotonic, when given)."""
    try:
        async with clock.timeout_at(deadline):
            return await store.extend_lease(task.seq, task.lease_token, clock.now(), lease_margin)
    except (StorageUnavailable, TimeoutError):
        return None
