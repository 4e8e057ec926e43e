"""The dispatcher loop: when to claim, how many, and what runs concurrently.

One loop per process. It claims a batch sized to the free in-flight slots, starts one
delivery per task, and goes straight back for more after a full batch. Otherwise it
waits for a wake-up (an enqueue committed, a delivery freed a slot, another process
announced work), or for the poll interval: the fallback for work made due by time.

Eager dispatch: an enqueue through this process asks for free slots first (``offer``);
the storage leases the new tasks a claim would take at once in the enqueue's own
transaction, and ``adopt`` starts their deliveries: no wake, no claim, no second
transaction for them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Sequence

from workly.batching import GroupCommitter
from workly.breaker import BreakerRules
from workly.clock import Clock
from workly.delivery_stats import Rollup
from workly.dispatch.attempt_log import log_attempt
from workly.dispatch.deliverer import Deliverer
from workly.dispatch.http import NotSent
from workly.dispatch.leases import Lease, extend_in_database, send_by
from workly.dispatch.policy import DeliveryOutcome, judge, overdue
from workly.dispatch.result_retries import ResultSubmitter
from workly.metrics import Metrics
from workly.models import AttemptResult, Claim, ClaimedTask, LeaseOffer, RecordSummary
from workly.periodic import run_every
from workly.storage.contract import DispatchStore
from workly.tracing import Tracing

log = logging.getLogger("workly.dispatch")

# Told of every recorded batch (the service: wake-ups for freed tasks, Workly's own events).
RecordObserver = Callable[[Sequence[AttemptResult], RecordSummary], None]


class Dispatcher:
    def __init__(
        self,
        storage: DispatchStore,
        deliverer: Deliverer,
        clock: Clock,
        *,
        max_in_flight: int = 100,
        poll_interval: float = 1.0,
        lease_margin: float = 30.0,
        result_batch_max: int = 500,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
        breaker_rules: BreakerRules | None = None,
        on_recorded: RecordObserver | None = None,
        tracing: Tracing | None = None,
        rollup: Rollup | None = None,
        eager: bool = True,
        kept_on_retry: int | None = None,
    ) -> None:
        self._metrics = metrics or Metrics()
        self._kept_on_retry = kept_on_retry  # response bytes of an attempt to be retried (policy.judge)
        self._rollup = rollup or Rollup()  # the dashboard's charts (delivery_stats.py)
        self._tracing = tracing or Tracing()
        self._breaker_rules = breaker_rules or BreakerRules()
        self._on_recorded = on_recorded
        self._storage = storage
        self._deliverer = deliverer
        self._clock = clock
        self._max_in_flight = max_in_flight
        self._poll_interval = poll_interval
        self._lease_margin = lease_margin
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._abandon = asyncio.Event()
        self._holder = f"{socket.gethostname()}:{os.getpid()}"  # what a leased task shows
        self._in_flight: dict[asyncio.Task[None], Lease] = {}
        self._eager = eager
        self._reserved = 0  # slots offered to enqueues whose transactions are under way
        # Tasks claimed or leased while every slot was taken (an enqueue's offer overlapped a
        # claim, which sized its batch before the offer): each starts when a slot frees.
        self._waiting: collections.deque[Lease] = collections.deque()
        self._results: GroupCommitter[AttemptResult, RecordSummary] = GroupCommitter(
            self._record,
            max_batch=result_batch_max,
        )
        self._loop_task: asyncio.Task[None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self.heartbeats = 0
        self._stopping = False
        self._submitter = ResultSubmitter(storage, self._results, clock, lease_margin, lambda: self._stopping)
        self._given_up = False  # the stop waits no longer: nothing more starts
        self.last_tick = clock.monotonic()

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._run(), name="workly-dispatcher")
        self._heartbeat_task = run_every(
            self._clock, self._lease_margin / 3, self._heartbeat, "heartbeat", log
        )

    async def stop(self, grace: float = 10.0) -> None:
        """Stop claiming, give in-flight deliveries ``grace`` seconds (or until ``abandon``),
        flush results. What is still running then keeps its lease and comes back through
        the reaper."""
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            await self._loop_task
        if self._in_flight and not self._abandon.is_set():
            log.info(
                "stopping: waiting up to %gs for %d deliveries in flight (a second Ctrl-C stops at once; "
                "what is still running then comes back through the reaper)",
                grace,
                len(self._in_flight),
            )
            deadline = self._clock.monotonic() + grace
            # Waiting tasks start as deliveries end: wait for those too, within the grace.
            while self._in_flight and not self._abandon.is_set() and self._clock.monotonic() < deadline:
                await self._all_done_or_abandoned(list(self._in_flight), deadline)
        # From here on a freed slot starts nothing: a task waiting for one would go out after
        # the stop gave up on it, its result never recorded. It keeps its lease, as do those
        # cancelled below.
        self._given_up = True
        still_running = [delivery for delivery in self._in_flight if not delivery.done()]
        if still_running or self._waiting:
            log.warning(
                "stopped without waiting for %d deliveries in flight%s: they come back through the "
                "reaper when their leases end",
                len(still_running),
                f" and {len(self._waiting)} claimed ones waiting to start" if self._waiting else "",
            )
        for delivery in still_running:
            delivery.cancel()
        await asyncio.gather(*still_running, return_exceptions=True)
        await self._results.drain()
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task

    def abandon(self) -> None:
        """Stop waiting for the deliveries in flight (a second signal): ``stop`` cancels
        them now; their leases bring them back through the reaper."""
        self._abandon.set()

    async def _all_done_or_abandoned(self, deliveries: list[asyncio.Task[None]], deadline: float) -> None:
        every = asyncio.ensure_future(asyncio.wait(deliveries))  # cancelled, it leaves them running
        abandoned = asyncio.ensure_future(self._abandon.wait())
        try:
            with contextlib.suppress(TimeoutError):
                async with self._clock.timeout_at(deadline):
                    await asyncio.wait([every, abandoned], return_when=asyncio.FIRST_COMPLETED)
        finally:
            every.cancel()
            abandoned.cancel()

    async def settle(self) -> None:
        """Wait until every attempt result submitted so far is recorded (and observed)."""
        await self._results.drain()

    def alive(self, stall_seconds: float) -> bool:
        running = self._loop_task is not None and not self._loop_task.done()
        return running and self._clock.monotonic() - self.last_tick < stall_seconds

    def wake(self) -> None:
        """Claim now instead of at the next poll: work may be claimable (the service's
        work_available, or another process's announcement)."""
        self._wake.set()

    # --- eager dispatch ------------------------------------------------------------
    def offer(self, wanted: int, since: float) -> LeaseOffer | None:
        """Hold up to ``wanted`` free slots for an enqueue about to run (None: none free,
        stopping, or eager dispatch off). Every offer is settled by ``adopt``. ``since``: the
        clock's monotonic reading taken before the enqueue read its ``now`` (dispatch/leases.py)."""
        slots = min(wanted, self._free_slots())
        if not self._eager or self._stopping or slots <= 0:
            return None
        self._reserved += slots
        return LeaseOffer(slots, self._new_lease_token(), self._lease_margin, since)

    def adopt(self, offer: LeaseOffer, leased: Sequence[ClaimedTask]) -> None:
        """The enqueue that took ``offer`` is over: start the deliveries of what it leased
        and free the rest of the slots (which a claim cut short by them may want)."""
        self._reserved -= offer.slots
        if leased:
            self._metrics.eager_dispatches.inc(len(leased))
        deadline = send_by(offer.since, self._lease_margin)
        for task in leased:
            self._start_delivery(Lease(task, deadline))
        if len(leased) < offer.slots:
            self._wake.set()

    # --- the loop ------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._stopping:
            self.last_tick = self._clock.monotonic()
            self._wake.clear()
            wanted = self._free_slots()
            since = self._clock.monotonic()  # before the claim reads its now: dispatch/leases.py
            claim = await self._claim(wanted) if wanted > 0 else Claim([])
            if claim.tasks:
                self._metrics.claim_batch.observe(len(claim.tasks))
            deadline = send_by(since, self._lease_margin)
            for task in claim.tasks:
                self._start_delivery(Lease(task, deadline))
            if claim.tasks and (len(claim.tasks) == wanted or claim.more):
                continue  # a full batch, or shares cut it short: there may be more, claim again
            # Nothing more is due now. The next wake (an enqueue committed, a delivery
            # freed a slot, another process announced work), the next token of a
            # rate-limited queue, or the poll interval (work that became due by time)
            # starts the next claim; a wake that came while this claim ran has left the
            # event set, so that costs no wait at all.
            await self._sleep(claim.rate_wait)

    async def _claim(self, wanted: int) -> Claim:
        started = time.time_ns()
        try:
            lease = self._new_lease_token()
            claim = await self._storage.claim_tasks(wanted, self._clock.now(), lease, self._lease_margin)
        except Exception:
            log.exception("claim failed; retrying after the poll interval")
            return Claim([])
        self._metrics.claim_seconds.observe((time.time_ns() - started) / 1e9)
        if claim.tasks and self._tracing.enabled:
            self._tracing.claimed(started, len(claim.tasks))
        return claim

    def _free_slots(self) -> int:
        return self._max_in_flight - len(self._in_flight) - len(self._waiting) - self._reserved

    def _new_lease_token(self) -> str:
        return f"{self._holder}/{uuid.uuid4().hex}"  # the task shows who holds it

    async def _heartbeat(self) -> None:
        """Run every lease_margin/3 s: extend the leases of every delivery in flight at once.

        A lease is never shorter than the margin, so a live process renews each lease at
        least three times before it could expire: only a dead or stalled process loses one.
        Only the leases the database renewed get a later local deadline, and only as late as
        this call's own monotonic reading allows (read before its now).
        """
        held = [*self._in_flight.values(), *self._waiting]
        if held:
            since = self._clock.monotonic()
            extended = await self._storage.extend_leases(
                [(lease.task.seq, lease.task.lease_token) for lease in held],
                self._clock.now(),
                self._lease_margin,
            )
            for lease in held:
                if (lease.task.seq, lease.task.lease_token) in extended:
                    lease.renewed(since, self._lease_margin)
            self.heartbeats += 1

    async def _sleep(self, rate_wait: float | None) -> None:
        timeout = self._poll_interval if rate_wait is None else min(self._poll_interval, rate_wait)
        await self._clock.wait(self._wake, timeout)

    # --- deliveries ------------------------------------------------------------------
    def _start_delivery(self, lease: Lease) -> None:
        if len(self._in_flight) >= self._max_in_flight:
            self._waiting.append(lease)
            return
        delivery = asyncio.create_task(self._deliver(lease), name=f"deliver-{lease.task.id}")
        self._in_flight[delivery] = lease
        self._metrics.in_flight.set(len(self._in_flight))
        delivery.add_done_callback(self._delivery_done)

    def _delivery_done(self, delivery: asyncio.Task[None]) -> None:
        # Runs once the attempt's result is recorded (or failed to be): the slot is free,
        # and so is a place under its queue's max_concurrency, which may let a claim take
        # a task that waits there (from any process: this one cannot know), a leased
        # task's as much as a claimed one's.
        self._in_flight.pop(delivery, None)
        self._metrics.in_flight.set(len(self._in_flight))
        if self._waiting and not self._given_up:
            self._start_delivery(self._waiting.popleft())
        self._wake.set()

    async def _deliver(self, lease: Lease) -> None:
        task = lease.task
        # It waited for a slot, or the process was stopped, or heartbeats did not get through.
        if lease.lapsed(self._clock.monotonic()) and not await self._still_held(lease):
            self._lapsed(lease)
            return
        late = overdue(task, self._clock.now())
        if late is not None:
            log.info("task %s not sent: %s", task.id, late.error)
            self._metrics.deliveries_of(self._metrics.queue_label(task.queue), late.outcome).inc()
            self._rollup.add(task.queue, task.endpoint_id, self._clock.now(), late.outcome, None)
            await self._submitter.submit(task, late)
            return
        try:
            outcome = await self._send(lease)
        except NotSent:
            self._lapsed(lease)
            return
        result = judge(task, outcome, self._rng, self._kept_on_retry)
        seconds = (outcome.finished_at - outcome.started_at).total_seconds()
        self._observe(task, outcome, result, seconds)
        # A success is counted (workly_deliveries_total, the dashboard's charts) and logged at
        # debug: one info line per delivered task was 6% of the server's CPU. Whatever did
        # not succeed stays at info, where the operator looks.
        level = logging.DEBUG if result.outcome == "succeeded" else logging.INFO
        if log.isEnabledFor(level):
            log_attempt(level, task, outcome, result, seconds)
        await self._submitter.submit(task, result)

    async def _send(self, lease: Lease) -> DeliveryOutcome:
        """The attempt, the deadline asked again right before the request is written
        (connecting may take long); once more if the database says the lease still holds."""

        def may_send() -> bool:
            return not lease.lapsed(self._clock.monotonic())

        try:
            return await self._deliverer.deliver(lease.task, may_send)
        except NotSent:
            if not await self._still_held(lease):
                raise
        return await self._deliverer.deliver(lease.task, may_send)

    async def _still_held(self, lease: Lease) -> bool:
        """Past its local deadline a lease may still hold in the database (heartbeats kept
        from renewing it: a failover, a busy pool): extend it there. Held, it is renewed
        from a reading taken before the extension's ``now``; gone (reaped, claimed again)
        or no answer, it is not sent. The answer is awaited one heartbeat interval at most
        (margin/3, never shorter than a statement's timeout): a pool that hands out no
        connection for longer is a database not keeping up, and the task comes back through
        the reaper."""
        since = self._clock.monotonic()
        deadline = since + self._lease_margin / 3
        if not await extend_in_database(self._storage, lease.task, self._clock, self._lease_margin, deadline):
            return False
        lease.renewed(since, self._lease_margin)
        return True

    def _lapsed(self, lease: Lease) -> None:
        """Its lease may end before a request written now would be over, and the database
        did not extend it (the reaper of any process may have given the task back): not
        sent, and no result recorded, as a delivery abandoned at shutdown. The lease brings
        it back through the reaper, which counts the attempt as "lease expired"."""
        late = self._clock.monotonic() - lease.send_by
        log.warning(
            "task %s not sent: %.1fs past the last moment its lease covered a request (this process "
            "was stopped or kept waiting); it comes back through the reaper",
            lease.task.id,
            late,
        )
        self._metrics.leases_lapsed.inc()

    def _observe(
        self, task: ClaimedTask, outcome: DeliveryOutcome, result: AttemptResult, seconds: float
    ) -> None:
        m = self._metrics
        label = m.queue_label(task.queue)
        m.deliveries_of(label, result.outcome).inc()
        if task.endpoint_id is not None and m.per_endpoint:
            m.endpoint_deliveries_of(task.endpoint_id, result.outcome).inc()
        m.delivery_seconds_of(label).observe(seconds)
        self._rollup.add(task.queue, task.endpoint_id, outcome.finished_at, result.outcome, seconds)
        if task.attempt == 1 and task.due_at is not None:
            waited = (outcome.started_at - task.due_at).total_seconds()
            m.first_attempt_latency_of(label).observe(max(0.0, waited))

    async def _record(self, results: Sequence[AttemptResult]) -> list[RecordSummary]:
        summary = await self._storage.record_results(results, self._clock.now(), self._breaker_rules)
        self._metrics.commit_batch_of("results").observe(len(results))
        if self._on_recorded is not None:
            try:
                self._on_recorded(results, summary)
            except Exception:
                log.exception("handling the outcome of %d recorded result(s) failed", len(results))
        self._metrics.stale_results.inc(summary.stale)
        if summary.opened:
            self._metrics.breaker_transitions.labels("open").inc(summary.opened)
            log.warning("%d circuit breaker(s) opened: their receivers' tasks are held", summary.opened)
        if summary.closed:
            self._metrics.breaker_transitions.labels("closed").inc(summary.closed)
            log.info("%d circuit breaker(s) closed, %d held task(s) freed", summary.closed, summary.released)
        for endpoint_id, reason in summary.disabled:
            log.warning("endpoint %s disabled: %s", endpoint_id, reason)
        if summary.stale:
            log.warning("refused %d stale result(s): their lease had been taken over", summary.stale)
        return [summary] * len(results)
