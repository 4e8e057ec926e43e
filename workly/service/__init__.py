"""The application core (core.py) and how it is put together (assembly.py)."""

from workly.service.assembly import outbound_client
from workly.service.core import Readiness, Service, migrate_database

__all__ = ["Readiness", "Service", "migrate_database", "outbound_client"]
