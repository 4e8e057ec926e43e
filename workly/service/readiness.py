"""What /health/ready reports (Service.readiness)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Readiness:
    database_error: str | None  # None: the database answered
    dispatcher: str  # "ok", "down", "disabled" (an API-only process), "unknown" (no database)
