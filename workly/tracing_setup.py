"""Which tracing the environment asks for (workly/tracing.py): OpenTelemetry's, or none."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from workly.tracing import Tracing

log = logging.getLogger("workly")


def _configured(environ: Mapping[str, str]) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    # A comma-separated list, as the specification has it.
    named = {name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",")} - {""}
    if "none" in named:
        return False
    if named - {"otlp"}:
        log.warning(
            "OTEL_TRACES_EXPORTER names %s: Workly exports spans over OTLP only%s",
            ", ".join(sorted(named - {"otlp"})),
            "" if "otlp" in named else ": none go out",
        )
        if "otlp" not in named:
            return False
    # otlp named, or an endpoint given (the exporter then defaults to otlp).
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return "otlp" in named or any(environ.get(name) for name in endpoints)


def tracing_from_environment(environ: Mapping[str, str] = os.environ) -> Tracing:
    """OpenTelemetry spans when the OTEL_* variables ask for them and the ``otel`` extra is
    installed; else the context-only default. Imports OpenTelemetry only in the first case."""
    if not _configured(environ):
        return Tracing()
    try:
        from workly.otel import OtelTracing

        return OtelTracing(environ)
    except ImportError as exc:
        log.warning(
            "OTEL_* is set but OpenTelemetry is not installed (%s): no spans are exported; "
            "install Workly with the otel extra (pip install 'workly[otel]')",
            exc,
        )
        return Tracing()
