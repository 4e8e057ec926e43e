"""The application core (workly/service/core.py): what every adapter calls."""

from workly.service.core import Readiness, Service, migrate_database, outbound_client

__all__ = ["Readiness", "Service", "migrate_database", "outbound_client"]
