"""The PostgreSQL backend (storage.py composes it; a module per storage role)."""

from workly.storage.postgres.storage import PostgresStorage

__all__ = ["PostgresStorage"]
