"""Task ids: unique, time-ordered, ULID-shaped."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from workly.ids import _base32, new_task_id


def test_ids_are_unique_and_well_formed() -> None:
    ids = {new_task_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(re.fullmatch(r"task_[0-9A-HJKMNP-TV-Z]{26}", i) for i in ids)


def test_ids_sort_by_creation_millisecond() -> None:
    assert new_task_id(now_ms=1_000) < new_task_id(now_ms=1_001) < new_task_id(now_ms=2**47)


def _digits_one_by_one(value: int) -> str:
    """Crockford base32, most significant digit first, one digit at a time: the reference."""
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return "".join(alphabet[(value >> (5 * (25 - place))) & 31] for place in range(26))


@given(st.integers(min_value=0, max_value=2**128 - 1))
@example(0)
@example(2**128 - 1)
def test_the_base32_text_is_the_value_digit_by_digit(value: int) -> None:
    assert _base32(value) == _digits_one_by_one(value)


def test_the_time_is_the_first_ten_digits() -> None:
    assert new_task_id(now_ms=0)[5:15] == "0" * 10
    assert new_task_id(now_ms=2**48 - 1)[5:15] == "7ZZZZZZZZZ"
    assert new_task_id(now_ms=2**48)[5:15] == "0" * 10  # 48 bits of time, as the SQL ids have
