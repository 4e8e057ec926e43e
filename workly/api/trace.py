"""The W3C trace context headers an enqueue or a publish may carry (workly/trace_context.py).

They never make a request fail: a malformed or oversized value is ignored, as the
specification asks, and the request is served."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header

from workly.trace_context import TraceContext, from_headers


def trace_headers(
    traceparent: Annotated[
        str | None,
        Header(
            description="W3C trace context: every attempt's delivery carries this trace id with a new "
            "span id (a malformed value is ignored)",
        ),
    ] = None,
    tracestate: Annotated[
        list[str] | None,
        Header(description="W3C trace context, passed on unchanged (repeated headers are joined)"),
    ] = None,
) -> TraceContext | None:
    return from_headers(traceparent, tracestate or [])


TraceHeaders = Annotated[TraceContext | None, Depends(trace_headers)]
