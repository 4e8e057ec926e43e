"""Fixtures for the dashboard's in-process tests (no browser, no socket), on SQLite and on
PostgreSQL. The dispatcher never runs here (``dispatch=False``): nothing is delivered and no
operation or schedule runs by itself. What the tests share besides is in helpers.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.servers import TEST_SECRET, TEST_TOKEN, in_process
from workly.config import Settings
from workly.service import Service

# helpers.py asserts what a login and a refused button answer: let its asserts say what they
# compared when they fail, as a test module's do.
pytest.register_assert_rewrite("tests.ui.helpers")


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    """The app with an API token required (no dispatcher): its service, and a client that
    sends no token by itself."""
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=TEST_TOKEN
    )
    async with in_process(settings) as (service, client):
        yield service, client


@pytest.fixture
def http(app: tuple[Service, httpx.AsyncClient]) -> httpx.AsyncClient:
    """The app's client: it sends no token by itself, and has no session until it logs in."""
    return app[1]
