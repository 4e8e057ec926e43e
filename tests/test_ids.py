"""Task ids: unique, time-ordered, ULID-shaped."""

from __future__ import annotations

import re

from workly.ids import new_task_id


def test_ids_are_unique_and_well_formed() -> None:
    ids = {new_task_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(re.fullmatch(r"task_[0-9A-HJKMNP-TV-Z]{26}", i) for i in ids)


def test_ids_sort_by_creation_millisecond() -> None:
    assert new_task_id(now_ms=1_000) < new_task_id(now_ms=1_001) < new_task_id(now_ms=2**47)
