"""Every table and column of a Workly database, searched for some bytes: what a tenant's
erasure must leave nowhere (docs/retention.md). Reads the database directly (SQLite file or
PostgreSQL URL), outside the storage: nothing of the storage's own view is trusted."""

from __future__ import annotations

import sqlite3

import asyncpg

_PG_COLUMNS = """
SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
ORDER BY c.table_name, c.ordinal_position
"""


async def where_found(database_url: str, needle: bytes) -> list[str]:
    """The ``table.column`` of every row holding ``needle`` (a column once per row found)."""
    if database_url.startswith("sqlite"):
        return _sqlite(database_url.removeprefix("sqlite:///"), needle)
    return await _postgres(database_url, needle)


def _sqlite(path: str, needle: bytes) -> list[str]:
    found: list[str] = []
    db = sqlite3.connect(path)
    try:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for column in [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]:
                [(count,)] = db.execute(
                    f'SELECT count(*) FROM "{table}" WHERE instr(CAST("{column}" AS BLOB), ?) > 0', (needle,)
                )
                found += [f"{table}.{column}"] * count
    finally:
        db.close()
    return found


async def _postgres(url: str, needle: bytes) -> list[str]:
    found: list[str] = []
    conn = await asyncpg.connect(url)
    try:
        for table, column, data_type in await conn.fetch(_PG_COLUMNS):
            if data_type == "bytea":
                where = f'position($1::bytea in "{column}") > 0'
                argument: object = needle
            else:  # text, json, arrays, jsonpath, times, numbers: all as their text
                where = f'position($1::text in "{column}"::text) > 0'
                argument = needle.decode()
            count = await conn.fetchval(f'SELECT count(*) FROM "{table}" WHERE {where}', argument)
            found += [f"{table}.{column}"] * count
    finally:
        await conn.close()
    return found
