"""The claim's rules as pure functions (SQLite applies them; PostgreSQL's SQL mirrors them)."""

from __future__ import annotations

import pytest

from workly.storage.claim_rules import Candidate, burst, choose, rate_wait, share, take, tokens_now


@pytest.mark.parametrize(("rate", "expected"), [(0.5, 1.0), (10, 1.0), (25, 2.5), (1000, 100.0)])
def test_the_burst_is_a_tenth_of_a_second_and_at_least_one(rate: float, expected: float) -> None:
    assert burst(rate) == expected


def test_a_new_bucket_is_full_and_refills_up_to_the_burst() -> None:
    assert tokens_now(100, None, None) == 10
    assert tokens_now(100, 0.0, 0.05) == pytest.approx(5)
    assert tokens_now(100, 0.0, 3600) == 10
    assert tokens_now(100, 2.0, -1.0) == 2.0  # a clock that went back adds nothing


@pytest.mark.parametrize(
    ("max_concurrency", "running", "tokens", "limit", "expected"),
    [
        (3, 0, None, 100, 3),
        (3, 3, None, 100, 0),
        (3, 5, None, 100, 0),
        (100, 0, 2.9, 100, 2),
        (100, 0, None, 7, 7),
    ],
)
def test_take_is_the_smallest_of_room_tokens_and_batch(
    max_concurrency: int, running: int, tokens: float | None, limit: int, expected: int
) -> None:
    assert take(max_concurrency, running, tokens, limit) == expected


def test_share_reads_enough_per_group_to_fill_the_take() -> None:
    assert share(10, 1) == 10
    assert share(10, 3) == 4
    assert share(4, 100) == 1


def test_rate_wait_only_for_a_drained_bucket() -> None:
    assert rate_wait(10, 0.25) == pytest.approx(0.075)
    assert rate_wait(10, 1.0) is None


def c(seq: int, queue: str = "q", kind: str = "p", group: str = "", priority: int = 0) -> Candidate:
    return Candidate(seq, queue, kind, group, priority, run_at=seq)  # type: ignore[arg-type]


def test_rounds_interleave_groups_and_respect_the_take() -> None:
    candidates = [c(1, kind="t", group="big"), c(2, kind="t", group="big"), c(3, kind="t", group="big")]
    candidates += [c(9, kind="t", group="small")]
    chosen = choose(candidates, {"q": 3}, {}, limit=100)
    assert [x.seq for x in chosen] == [1, 9, 2]


def test_the_least_recently_served_tenant_goes_first_and_never_served_before_all() -> None:
    candidates = [c(1, kind="t", group="a"), c(2, kind="t", group="b"), c(3, kind="t", group="new")]
    served = {("q", "a"): 200, ("q", "b"): 100}
    assert [x.seq for x in choose(candidates, {"q": 3}, served, limit=100)] == [3, 2, 1]


def test_priority_comes_before_turns_within_a_round() -> None:
    candidates = [c(1, kind="t", group="a"), c(2, kind="t", group="b", priority=5)]
    assert [x.seq for x in choose(candidates, {"q": 2}, {("q", "b"): 999}, limit=100)] == [2, 1]


def test_queues_are_interleaved_and_the_batch_is_cut() -> None:
    candidates = [c(n, queue="deep") for n in range(1, 6)] + [c(10, queue="late")]
    chosen = choose(candidates, {"deep": 5, "late": 1}, {}, limit=3)
    assert [x.seq for x in chosen] == [1, 10, 2]
