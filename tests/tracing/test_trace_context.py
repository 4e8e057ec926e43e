"""W3C Trace Context parsing and the child contexts attempts carry: pure functions."""

from __future__ import annotations

import pytest

from workly.trace_context import TraceContext, parse_trace_context

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{PARENT}-01"


def test_a_valid_traceparent_and_its_tracestate() -> None:
    context = parse_trace_context(VALID, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
    assert context == TraceContext(TRACE, PARENT, "01", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
    assert context.traceparent == VALID
    assert parse_trace_context(f"  {VALID} ") == TraceContext(TRACE, PARENT, "01")


@pytest.mark.parametrize(
    "value",
    [
        "",
        "garbage",
        f"00-{TRACE}-{PARENT}",  # no flags
        f"00-{TRACE.upper()}-{PARENT}-01",  # upper case
        f"00-{'0' * 32}-{PARENT}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        f"ff-{TRACE}-{PARENT}-01",  # the forbidden version
        f"00-{TRACE}-{PARENT}-01-extra",  # version 00 has exactly four fields
        f"01-{TRACE}-{PARENT}-01extra",  # a later version's extra fields start with "-"
        f"00_{TRACE}_{PARENT}_01",
    ],
)
def test_a_malformed_traceparent_is_ignored(value: str) -> None:
    assert parse_trace_context(value, "a=b") is None


def test_a_later_version_is_read_by_its_first_four_fields() -> None:
    assert parse_trace_context(f"cc-{TRACE}-{PARENT}-01-what-comes-next") == TraceContext(TRACE, PARENT, "01")


@pytest.mark.parametrize("state", ["", "x" * 513, "a=b\x00", "ключ=значение"])
def test_a_tracestate_that_cannot_be_passed_on_is_dropped_the_trace_kept(state: str) -> None:
    assert parse_trace_context(VALID, state) == TraceContext(TRACE, PARENT, "01")


def test_a_child_keeps_the_trace_flags_and_state_with_a_new_span_id() -> None:
    context = parse_trace_context(f"00-{TRACE}-{PARENT}-00", "a=b")
    assert context is not None
    first, second = context.child(), context.child()
    assert first.trace_id == second.trace_id == TRACE
    assert len({first.parent_id, second.parent_id, PARENT}) == 3
    assert first.headers() == {"traceparent": f"00-{TRACE}-{first.parent_id}-00", "tracestate": "a=b"}
    assert context.child("1111111111111111").traceparent == f"00-{TRACE}-1111111111111111-00"
