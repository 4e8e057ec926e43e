"""Rows of a tenant's export as domain objects, for both backends."""

from __future__ import annotations

from collections.abc import Sequence

from workly.lifecycle import ExportedTask
from workly.models import Attempt
from workly.storage.rows import Decoders, Row, attempt_from_row, task_from_row


def exported(tasks: Sequence[Row], attempts: Sequence[Row], dec: Decoders) -> list[ExportedTask]:
    """Task rows with their attempt rows (``task_seq`` says whose)."""
    by_task: dict[int, list[Attempt]] = {}
    for row in attempts:
        by_task.setdefault(row["task_seq"], []).append(attempt_from_row(row, dec))
    return [ExportedTask(row["seq"], task_from_row(row, dec), by_task.get(row["seq"], [])) for row in tasks]
