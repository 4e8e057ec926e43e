"""Balancing the books: every delivery Workly accepted, against the database and the ledger.

For each accepted delivery (a task, or one endpoint's task of an event):

- gone from the database: retention deleted it. A kind meant to fail may have failed and
  been deleted by WORKLY_FAILED_RETENTION: the receiver must have seen it; any other kind
  was deleted as succeeded, so the receiver must have answered it 2xx; otherwise it is
  **lost**;
- ``succeeded``: the receiver must have answered it 2xx;
- ``failed``: only the kinds meant to fail (410, always 500) may, and the receiver must
  never have answered them 2xx; another kind that failed is an **unexpected failure**;
- ``ready``, ``running`` or ``canceled`` after the drain: **unfinished**.

A send Workly answered with a 4xx (it refused a valid request) is a violation too, and so
is a fault that could not be undone (a process that did not come back), a send no process
accepted in ~30 s of tries (Workly unavailable that long), an event whose deliveries are not
exactly the endpoints its type and tenant match (computed by the soak from its own
endpoint table, not taken from Workly's answer), and a send the soak itself failed to make
or read (the run cannot vouch for it).

A delivery answered 2xx more than once is a duplicate, excused only when its first 2xx
fell within the window of a fault that can cause one (a process killed, paused or cut off
from its database before it recorded the result; not a receiver outage), or of a stall the
soak saw that can (tools/soak/stalls.py; counted apart). Ordering, concurrency, delay and
webhook-id breaches recorded by the ledger are violations, except within seconds of the end
of a clock jump that aged the leases (live processes' leases expired by the wall clock,
which their own monotonic deadlines do not see), and an order breach or a concurrency excess
within seconds of a paused process continuing. Not an overlap (two requests of one ordering
key in flight at the receiver at once) after a pause: a process that continues does not
send what its lease may no longer cover (issue 40, docs/reliability.md), so one is a
violation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tools.soak.database import TaskRow
from tools.soak.faults import SLACK, Fault
from tools.soak.ledger import Ledger
from tools.soak.workload import FAILS, Accepted

_AFTER_CLOCK_JUMP = {"order", "overlap", "concurrency"}
_AFTER_CONTINUE = {"order", "concurrency"}


@dataclass
class Books:
    deliveries: int = 0
    by_state: Counter[str] = field(default_factory=Counter)  # succeeded, failed, pruned, …
    lost: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    unexpected_failures: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)  # database and receiver disagree
    duplicates: int = 0
    excused_duplicates: int = 0  # by a planned fault
    excused_by_stall: int = 0  # by a stall the soak saw (tools/soak/stalls.py)
    unexcused_duplicates: list[str] = field(default_factory=list)
    breaches: Counter[str] = field(default_factory=Counter)
    keyed_requests: int = 0  # requests of ordering keys the receiver checked for overlaps
    max_key_in_flight: int = 0  # the most of one key in flight there at once (1: never two)
    excused_breaches: Counter[str] = field(default_factory=Counter)
    unexcused_breaches: list[str] = field(default_factory=list)
    failed_faults: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # sends Workly answered 4xx
    never_acknowledged: int = 0  # sends no process accepted within ~30 s of tries
    fan_out: list[str] = field(default_factory=list)  # events not sent to the endpoints they match
    soak_errors: list[str] = field(default_factory=list)  # sends the soak itself failed: the run is void

    @property
    def violations(self) -> int:
        return (
            len(self.lost) + len(self.unfinished) + len(self.unexpected_failures) + len(self.disagreements)
            + len(self.unexcused_duplicates) + len(self.unexcused_breaches) + len(self.failed_faults)
            + len(self.refused) + len(self.soak_errors) + self.never_acknowledged + len(self.fan_out)
        )  # fmt: skip

    def as_json(self) -> dict[str, object]:
        def head(items: list[str]) -> dict[str, object]:
            return {"count": len(items), "first": items[:20]}

        return {
            "deliveries": self.deliveries, "by_state": dict(self.by_state), "lost": head(self.lost),
            "unfinished": head(self.unfinished), "unexpected_failures": head(self.unexpected_failures),
            "disagreements": head(self.disagreements), "duplicates": self.duplicates,
            "excused_duplicates": self.excused_duplicates, "excused_by_stall": self.excused_by_stall,
            "unexcused_duplicates": head(self.unexcused_duplicates),
            "breaches": dict(self.breaches), "keyed_requests": self.keyed_requests,
            "max_key_in_flight": self.max_key_in_flight, "excused_breaches": dict(self.excused_breaches),
            "unexcused_breaches": head(self.unexcused_breaches), "failed_faults": self.failed_faults,
            "refused": head(self.refused), "soak_errors": head(self.soak_errors),
            "never_acknowledged": self.never_acknowledged, "fan_out": head(self.fan_out),
            "violations": self.violations,
        }  # fmt: skip


def balance(
    accepted: list[Accepted],
    rows: dict[str, TaskRow],
    ledger: Ledger,
    faults: list[Fault],
    refused: list[str] | None = None,
    origin: float = 0.0,
    soak_errors: list[str] | None = None,
    never_acknowledged: int = 0,
    stalls: list[Fault] | None = None,
) -> Books:
    """``origin``: the time the soak began (time.time()), to name moments relative to it;
    ``stalls``: those the soak saw (tools/soak/stalls.py)."""
    excusing_stalls = [stall for stall in stalls or [] if stall.may_duplicate]
    books = Books(
        failed_faults=[f"{f.kind} {f.target}: {f.error}" for f in faults if f.error],
        refused=list(refused or []),
        soak_errors=list(soak_errors or []),
        never_acknowledged=never_acknowledged,
        keyed_requests=ledger.keyed_requests,
        max_key_in_flight=ledger.max_key_in_flight,
    )
    for item in accepted:
        if item.fan_out_error:
            books.fan_out.append(f"event serial {item.serial}: {item.fan_out_error}")
        for expected in item.deliveries:
            books.deliveries += 1
            seen = ledger.deliveries.get((expected.webhook_id, expected.path))
            answered = bool(seen and seen.successes)
            row = rows.get(expected.task_id)
            name = f"{item.kind} serial {item.serial} task {expected.task_id} {expected.path}"
            if row is None:
                books.by_state["pruned"] += 1
                if item.kind in FAILS:  # failed, then deleted by WORKLY_FAILED_RETENTION: it was tried
                    if seen is None or not seen.requests:
                        books.lost.append(f"{name}: not in the database and never sent")
                elif not answered:
                    books.lost.append(f"{name}: not in the database and never answered 2xx")
            else:
                books.by_state[row.status] += 1
                _check_row(books, item, name, row, answered)
            if seen and len(seen.successes) > 1:
                books.duplicates += len(seen.successes) - 1
                first = seen.successes[0]
                if any(fault.may_duplicate and fault.covers(first) for fault in faults):
                    books.excused_duplicates += len(seen.successes) - 1
                elif any(stall.covers(first) for stall in excusing_stalls):
                    books.excused_by_stall += len(seen.successes) - 1
                else:
                    moments = ", ".join(f"{moment - origin:.1f}s" for moment in seen.successes)
                    books.unexcused_duplicates.append(f"{name}: 2xx answers at {moments}")
    for breach in ledger.breaches:
        books.breaches[breach.kind] += 1
        if _excused(breach.kind, breach.at, faults, excusing_stalls):
            books.excused_breaches[breach.kind] += 1
        else:
            books.unexcused_breaches.append(f"{breach.kind} at {breach.at - origin:.3f}s: {breach.detail}")
    return books


def _check_row(books: Books, item: Accepted, name: str, row: TaskRow, answered: bool) -> None:
    if row.status == "succeeded":
        if not answered:
            books.disagreements.append(f"{name}: succeeded, but the receiver never answered 2xx")
    elif row.status == "failed":
        if item.kind not in FAILS:
            books.unexpected_failures.append(
                f"{name}: failed after {row.attempts} attempts: {row.last_error}"
            )
        elif answered:
            books.disagreements.append(f"{name}: failed, but the receiver answered 2xx")
    else:
        books.unfinished.append(f"{name}: still {row.status} after the drain")


def _excused(kind: str, moment: float, faults: list[Fault], stalls: list[Fault]) -> bool:
    """Within seconds after the clock jumped past leases, or (not for an overlap) after a
    paused process continued."""
    jumps = [stall for stall in stalls if stall.target == "clock"] if kind in _AFTER_CLOCK_JUMP else []
    pauses = [fault for fault in faults if fault.kind == "pause"] if kind in _AFTER_CONTINUE else []
    return any(
        fault.ended is not None and fault.ended <= moment <= fault.ended + SLACK
        for fault in [*jumps, *pauses]
    )
