"""The SQL functions' rules do not depend on the database's locale: in a database whose
default collation is Turkish (ICU tr-TR), lower('I') is a dotless i (U+0131), and a header check or a
breaker key written with plain lower() would let CONNECTION through and key WIKI.example
apart from wiki.example. The functions fold case as the C locale does (ASCII), as Python
does for the header names and hosts they check."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.support.postgres import drop_database, with_database
from workly.storage.postgres import PostgresStorage


@pytest.fixture
async def turkish_db(pg_server: str) -> AsyncIterator[str]:
    name = "workly_test_tr"
    admin = await asyncpg.connect(pg_server)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name}")
        await admin.execute(
            f"CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'tr-TR'"
        )
    finally:
        await admin.close()
    url = with_database(pg_server, name)
    yield url
    await drop_database(pg_server, url)


async def test_case_is_folded_the_same_in_a_turkish_database(turkish_db: str) -> None:
    storage = await PostgresStorage.open(turkish_db)
    try:
        await storage.database.migrate()
    finally:
        await storage.close()
    conn = await asyncpg.connect(turkish_db)
    try:
        assert await conn.fetchval("SELECT lower('I')") == "\u0131"  # the locale is what this test is about
        enqueue = "SELECT enqueue_task(queue => 'q', url => $1, headers => $2::jsonb)"
        for headers in ('{"CONNECTION": "close"}', '{"TRANSFER-ENCODING": "chunked"}',
                        '{"WEBHOOK-SIGNATURE": "v1,x"}', '{"X-ID": "1", "x-id": "2"}'):  # fmt: skip
            with pytest.raises(asyncpg.InvalidParameterValueError, match=r"^headers: "):
                await conn.fetchval(enqueue, "https://example.com/", headers)
        task_id = await conn.fetchval(enqueue, "HTTPS://WIKI.example/", "{}")
        assert (
            await conn.fetchval("SELECT breaker FROM tasks WHERE id = $1", task_id)
            == "https://wiki.example:443"
        )
    finally:
        await conn.close()
