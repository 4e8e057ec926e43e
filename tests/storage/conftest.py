"""Fixtures of the storage tests beyond the shared ones (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection to the emptied test database: for what the backend does not say
    (locks held, rows as stored)."""
    conn = await asyncpg.connect(pg_url)
    try:
        yield conn
    finally:
        await conn.close()
