"""Tracing with the OpenTelemetry SDK, exported over OTLP/HTTP (the ``otel`` extra).

Imported only by ``tracing_from_environment`` once the OTEL_* variables ask for spans. The
SDK reads its usual variables itself: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT and _HEADERS,
OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*.
Spans name no full URL: a webhook URL often holds a secret in its path or query, so an
attempt's span says the scheme, host and port only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from workly import __version__
from workly.trace_context import TraceContext
from workly.tracing import AttemptTrace, Tracing

log = logging.getLogger("workly")


class OtelTracing(Tracing):
    enabled = True

    def __init__(self, environ: Mapping[str, str]) -> None:
        protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL"
        )
        if protocol and protocol.strip().lower() != "http/protobuf":
            log.warning("Workly exports spans with OTLP over HTTP (http/protobuf) only, not %s", protocol)
        resource = Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME", "workly")})
        self._provider = TracerProvider(resource=resource)
        self._provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        self._tracer = self._provider.get_tracer("workly", __version__)
        self._propagator = TraceContextTextMapPropagator()

    def _parent(self, context: TraceContext | None) -> Any:
        return None if context is None else self._propagator.extract(context.headers())

    @staticmethod
    def _context_of(span: trace.Span, tracestate: str | None) -> TraceContext:
        found = span.get_span_context()
        return TraceContext(
            format(found.trace_id, "032x"),
            format(found.span_id, "016x"),
            format(found.trace_flags, "02x"),
            tracestate,
        )

    @contextmanager
    def enqueue(
        self, name: str, context: TraceContext | None, attributes: Mapping[str, Any]
    ) -> Iterator[TraceContext | None]:
        span = self._tracer.start_span(
            name, context=self._parent(context), kind=SpanKind.PRODUCER, attributes=dict(attributes)
        )
        try:
            yield self._context_of(span, None if context is None else context.tracestate)
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()

    @contextmanager
    def attempt(
        self, method: str, context: TraceContext | None, attributes: Mapping[str, Any]
    ) -> Iterator[AttemptTrace]:
        span = self._tracer.start_span(
            method, context=self._parent(context), kind=SpanKind.CLIENT, attributes=dict(attributes)
        )
        outcome = AttemptTrace(self._context_of(span, None if context is None else context.tracestate))
        try:
            yield outcome
        finally:
            span.set_attributes(outcome.attributes)
            if outcome.failed is not None:
                span.set_status(Status(StatusCode.ERROR, outcome.failed))
            span.end()

    def claimed(self, started_ns: int, count: int) -> None:
        span = self._tracer.start_span(
            "workly.claim",
            kind=SpanKind.INTERNAL,
            start_time=started_ns,
            attributes={"workly.claimed": count},
        )
        span.end(end_time=time.time_ns())

    def shutdown(self) -> None:
        self._provider.shutdown()
