"""The data lifecycle (docs/retention.md): how long finished tasks and events are kept, and
what a tenant's erasure and export go through."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from workly.models import Attempt, Task

OverrideKind = Literal["queue", "tenant"]
MAX_RETENTION = 100 * 365 * 86400  # seconds: a century (a cutoff further back is no date)

# A tenant's erasure goes through its rows in this order, one phase at a time, each chunk
# a short transaction; the operation keeps the phase it is at, so a restart resumes there.
# access: its keys (and their sessions), fairness state and schedules, the operations
#   naming it redacted, its endpoints disabled and paused;
# endpoints: each endpoint's deliveries, a chunk at a time, then the endpoint;
# events: its events with what is left of their deliveries;
# tasks: its plain tasks;
# notices: Workly's own events about its endpoints;
# tenant: what a claim or a late request made meanwhile (fairness state, keys, schedules,
#   events, plain tasks) goes too, going round again if there was any; then its row, and the
#   operation names it by its hash only.
ErasePhase = Literal["access", "endpoints", "events", "tasks", "notices", "tenant"]
# Where a phase goes once a chunk of it found less than a whole chunk ("endpoints": no
# endpoint left); until then it stays.
_NEXT: dict[ErasePhase, ErasePhase] = {
    "access": "endpoints",
    "endpoints": "events",
    "events": "tasks",
    "tasks": "notices",
    "notices": "tenant",
}


def next_phase(phase: ErasePhase, done: bool) -> ErasePhase:
    """The phase of an erase's next chunk: the next one once ``phase`` is ``done``."""
    return _NEXT[phase] if done else phase


@dataclass(frozen=True, slots=True)
class RetentionOverride:
    """A queue or tenant keeping its finished tasks (and a tenant its events) ``seconds``
    instead of WORKLY_RETENTION and WORKLY_FAILED_RETENTION."""

    kind: OverrideKind
    name: str
    seconds: int


def tenant_hash(tenant: str) -> str:
    """How a finished erasure names its tenant: no row may hold the name any more, but the
    one who asked can still match the operation to it."""
    return "sha256:" + hashlib.sha256(tenant.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ExportedTask:
    """A task of a tenant's export with its attempts; ``seq`` continues the page."""

    seq: int
    task: Task
    attempts: list[Attempt]
