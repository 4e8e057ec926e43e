"""The W3C trace context headers an enqueue or a publish may carry (workly/trace_context.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header

from workly.trace_context import TraceContext, parse_trace_context

MAX_TRACE_HEADER = 1024  # longer is refused (422); the specification's values are far shorter


def trace_headers(
    traceparent: Annotated[
        str | None,
        Header(
            max_length=MAX_TRACE_HEADER,
            description="W3C trace context: every attempt's delivery carries this trace id with a new "
            "span id (a malformed value is ignored)",
        ),
    ] = None,
    tracestate: Annotated[
        str | None, Header(max_length=MAX_TRACE_HEADER, description="W3C trace context, passed on unchanged")
    ] = None,
) -> TraceContext | None:
    return parse_trace_context(traceparent, tracestate)


TraceHeaders = Annotated[TraceContext | None, Depends(trace_headers)]
