"""The data lifecycle (docs/retention.md): how long finished tasks and events are kept, and
what a tenant's erasure and export go through."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from workly.models import Attempt, Task

OverrideKind = Literal["queue", "tenant"]

# A tenant's erasure goes through its rows in this order, one phase at a time, each chunk
# a short transaction; the operation keeps the phase it is at, so a restart resumes there.
# access: its keys (and their sessions), fairness state and schedules, the operations
#   naming it redacted, its endpoints disabled and paused;
# endpoints: each endpoint's deliveries, a chunk at a time, then the endpoint;
# events: its events with what is left of their deliveries;
# tasks: its plain tasks;
# notices: Workly's own events about its endpoints;
# tenant: its row; the operation then names it by its hash only.
ErasePhase = Literal["access", "endpoints", "events", "tasks", "notices", "tenant"]


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
