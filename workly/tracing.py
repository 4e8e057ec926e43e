"""Spans for enqueues, claims and attempts, exported with OpenTelemetry when it is set up.

Without the ``otel`` extra (opentelemetry-sdk and its OTLP/HTTP exporter), or without the
standard ``OTEL_*`` variables naming where spans go, Workly makes no spans and imports
nothing of OpenTelemetry: ``Tracing`` only carries the W3C trace context from an enqueue to
its deliveries (each attempt a new span id of the same trace). With both, ``OtelTracing``
(workly/otel.py) exports:

- ``workly.enqueue`` / ``workly.publish`` (producer), child of the request's traceparent;
  the tasks keep its context, so their attempts are its children;
- ``workly.claim`` (internal), one per claim that took tasks;
- one client span per attempt, named after the method, whose id is the parent id of the
  delivery's ``traceparent``: the receiver's spans hang below it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from workly.trace_context import TraceContext


@dataclass
class AttemptTrace:
    """What an attempt's span passes on, and what it learns of the outcome."""

    context: TraceContext | None  # the delivery's traceparent: None sends none
    attributes: dict[str, Any] = field(default_factory=dict)
    failed: str | None = None  # why the attempt failed, when it did


class Tracing:
    """The default: no spans, only the trace context carried to each attempt."""

    enabled = False

    @contextmanager
    def enqueue(
        self, name: str, context: TraceContext | None, attributes: Mapping[str, Any]
    ) -> Iterator[TraceContext | None]:
        """A span around storing tasks (or an event); yields the context they keep."""
        yield context

    @contextmanager
    def attempt(
        self, method: str, context: TraceContext | None, attributes: Mapping[str, Any]
    ) -> Iterator[AttemptTrace]:
        """A span around one attempt; yields the context its request carries."""
        yield AttemptTrace(None if context is None else context.child())

    def claimed(self, started_ns: int, count: int) -> None:
        """A claim that began at ``started_ns`` (time.time_ns) took ``count`` tasks."""

    def shutdown(self) -> None:
        """Export what is left (blocking: call it off the event loop)."""
