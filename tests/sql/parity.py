"""Calling the API and a SQL function with the same fields, for the parity tests.

A field left out of the JSON is an argument left out; JSON null is SQL NULL, except for the
body-like argument (``json_null``: body, payload), whose JSON null is ``'null'::jsonb``. The
SQL call runs in a transaction that is rolled back, so it stores nothing; the API's call
commits as it always does.

Text never holds NUL here: PostgreSQL text cannot, so such input never reaches the function
(the driver refuses it), and the API refuses it in every field but a JSON body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import httpx


@dataclass
class Verdict:
    accepted: bool
    detail: str
    row: dict[str, Any] | None = None  # the row stored (None when an idempotency key matched)
    related: list[dict[str, Any]] | None = None  # the rows the ``related`` query found for it


@dataclass
class Rig:
    http: httpx.AsyncClient
    conn: asyncpg.Connection

    async def api(self, path: str, table: str, fields: dict[str, Any], related: str | None = None) -> Verdict:
        """POST ``fields``; the row the answer's id names in ``table`` (and the ``related``
        query's rows, $1 being that id)."""
        # json.dumps writes NaN and Infinity (as clients do); Python's parser on the server reads them.
        response = await self.http.post(
            path, content=json.dumps(fields), headers={"content-type": "application/json"}
        )
        assert response.status_code < 500, response.text
        if response.status_code >= 400:
            return Verdict(False, response.text)
        if response.status_code != 201:
            return Verdict(True, response.text)  # an idempotency key matched an earlier one
        made = response.json()["id"]
        row = await self.conn.fetchrow(f"SELECT * FROM {table} WHERE id = $1", made)
        assert row is not None
        found = None if related is None else [dict(r) for r in await self.conn.fetch(related, made)]
        return Verdict(True, response.text, dict(row), found)

    async def sql(
        self,
        function: str,
        table: str,
        types: dict[str, str],
        fields: dict[str, Any],
        json_null: str,
        related: str | None = None,
    ) -> Verdict:
        """Call ``function`` with ``fields`` as named arguments of ``types``; the row its id
        names in ``table`` if this call stored it. A refusal must be 22023 naming an argument."""
        values = [_argument(name, value, types[name], json_null) for name, value in fields.items()]
        arguments = ", ".join(f"{name} => ${n}::{types[name]}" for n, name in enumerate(fields, start=1))
        transaction = self.conn.transaction()
        await transaction.start()
        refusal: asyncpg.PostgresError | None = None
        try:
            made = await self.conn.fetchval(f"SELECT {function}({arguments})", *values)
            row = await self.conn.fetchrow(
                f"SELECT * FROM {table} WHERE id = $1 AND xmin = pg_current_xact_id()::xid", made
            )
            found = None if related is None else [dict(r) for r in await self.conn.fetch(related, made)]
        except asyncpg.PostgresError as exc:
            refusal = exc
        finally:
            await transaction.rollback()
        if refusal is None:
            return Verdict(True, made, None if row is None else dict(row), found)
        assert refusal.sqlstate == "22023", f"{refusal.sqlstate}: {refusal}"
        field = str(refusal).partition(":")[0]
        assert field in types, f"the message does not start with an argument's name: {refusal}"
        assert refusal.column_name == field  # type: ignore[attr-defined]
        return Verdict(False, str(refusal))


def _argument(name: str, value: Any, sql_type: str, json_null: str) -> Any:
    if name == json_null and value is None:
        return "null"
    if sql_type == "jsonb" and value is not None:
        return json.dumps(value)
    if sql_type == "timestamptz" and value is not None:
        return datetime.fromisoformat(value)
    return value
