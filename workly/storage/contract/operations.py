"""Failure handling: bulk operations over many tasks (workly/operations.py) and the
callbacks due after a task's final outcome (workly/callbacks.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from workly.callbacks import DueCallback
from workly.operations import CHUNK, Action, ChunkDone, Operation, TaskFilter


class OperationStore(Protocol):
    async def create_operation(
        self, operation_id: str, action: Action, task_filter: TaskFilter, now: datetime
    ) -> Operation:
        """Store a running operation covering the tasks stored now that ``task_filter``
        matches (``matched`` counts them); nothing is changed yet. A ``replay`` covers the
        events of ``task_filter.endpoint_id``'s tenant since ``created_after`` instead; raises
        EndpointNotFound, or ReplayRunning while another replay of it runs."""

    async def get_operation(self, operation_id: str) -> Operation | None: ...

    async def list_operations(self, limit: int, before_seq: int | None) -> tuple[list[Operation], int | None]:
        """Newest first; the int continues the list."""

    async def take_operation(self, now: datetime, lease_token: str, lease_seconds: float) -> Operation | None:
        """Lease the oldest running operation that no runner holds (or whose runner's lease
        expired) to ``lease_token`` for ``lease_seconds``; None when there is none."""

    async def release_operation(self, operation_id: str, lease_token: str) -> bool:
        """Give back an operation ``lease_token`` holds, for any runner to take at once;
        whether it held it."""

    async def run_operation_chunk(
        self, operation_id: str, lease_token: str, now: datetime, lease_seconds: float, chunk: int = CHUNK
    ) -> ChunkDone | None:
        """Apply the operation to its next ``chunk`` matching tasks and record the progress
        in one transaction, renewing the lease; the chunk that finds fewer finishes it.
        None if ``lease_token`` no longer holds it (finished, or taken over)."""


class CallbackStore(Protocol):
    async def due_callbacks(self, limit: int) -> list[DueCallback]:
        """Up to ``limit`` finished tasks whose callback is still to be sent, oldest first,
        each with its last attempt (its response as kept: up to WORKLY_MAX_BODY_BYTES)."""

    async def clear_callbacks(self, sent: Sequence[tuple[str, int]]) -> int:
        """Mark callbacks sent, for each (task id, callback_seq) whose task has not finished
        again since; how many."""
