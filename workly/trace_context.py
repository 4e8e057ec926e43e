"""W3C Trace Context (https://www.w3.org/TR/trace-context/): carried from an enqueue to
every attempt's delivery.

An enqueue or publish request's ``traceparent`` (and ``tracestate``) is kept with its
tasks; each attempt sends a ``traceparent`` with the same trace id and a new span id (the
attempt's), the trace flags kept, and the ``tracestate`` unchanged. A header that does not
parse is ignored, as the specification asks of a receiver: the request is served, the
trace starts afresh downstream. Pure functions, no tracing library.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_TRACESTATE = re.compile(r"[\x20-\x7e]*")  # printable ASCII; members are the vendors' business
MAX_TRACESTATE = 512  # the specification's limit on what must be propagated


@dataclass(frozen=True, slots=True)
class TraceContext:
    trace_id: str  # 32 lower-case hex digits
    parent_id: str  # 16: the span of whoever sent it
    flags: str  # 2 (01 = sampled)
    tracestate: str | None = None

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.parent_id}-{self.flags}"

    def child(self, span_id: str | None = None) -> TraceContext:
        """The context a new span of this trace passes on: ``span_id``, or a random one."""
        return TraceContext(self.trace_id, span_id or new_span_id(), self.flags, self.tracestate)

    def headers(self) -> dict[str, str]:
        shown = {"traceparent": self.traceparent}
        if self.tracestate:
            shown["tracestate"] = self.tracestate
        return shown


def new_span_id() -> str:
    while (span := os.urandom(8).hex()) == "0" * 16:
        pass
    return span


def parse_trace_context(traceparent: str | None, tracestate: str | None = None) -> TraceContext | None:
    """The context of a ``traceparent`` header, or None when it is absent or malformed.
    A future version's value is read by its first four fields (as the specification asks);
    a ``tracestate`` too long or not printable ASCII is dropped, the trace kept."""
    if traceparent is None:
        return None
    value = traceparent.strip()
    found = _TRACEPARENT.match(value)
    if found is None:
        return None
    version, trace_id, parent_id, flags = found.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    rest = value[found.end() :]
    if (version == "00" and rest) or (rest and not rest.startswith("-")):
        return None
    state = None
    if tracestate is not None:
        state = tracestate.strip()
        if not state or len(state) > MAX_TRACESTATE or not _TRACESTATE.fullmatch(state):
            state = None
    return TraceContext(trace_id, parent_id, flags, state)


def from_headers(traceparent: str | None, tracestates: list[str]) -> TraceContext | None:
    """The context of a request's headers: its (first) traceparent, and its tracestate
    headers joined into one list, as the specification combines repeated ones."""
    return parse_trace_context(traceparent, ",".join(tracestates) if tracestates else None)


def stored(context: TraceContext | None) -> tuple[str | None, str | None]:
    """(traceparent, tracestate) as a task keeps them."""
    return (None, None) if context is None else (context.traceparent, context.tracestate)
