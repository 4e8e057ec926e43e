"""The SQLite backend (storage.py composes it; a module per storage role)."""

from workly.storage.sqlite.storage import SqliteStorage

__all__ = ["SqliteStorage"]
