"""Storage: one contract (``Storage``), one backend per database."""

from workly.storage.base import Storage
from workly.storage.factory import open_storage

__all__ = ["Storage", "open_storage"]
