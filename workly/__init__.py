"""Workly: an HTTP delivery service (webhook dispatcher and HTTP task queue)."""

__version__ = "0.1.0"
