"""The columns a NewTask gives the tasks table, declared once (issue 40).

Adding a task field used to mean writing its column into every ``INSERT INTO tasks``, the
``unnest`` of PostgreSQL's enqueue, and both dialects' parameter builders. Now each of those
comes from ``TASK_COLUMNS``:

- the query loader (storage/queries.py) expands placeholders in the SQL files:

  ``@task_columns@``     the columns copied as given: ``id, queue, url, …`` (an INSERT's list)
  ``@task_values(r)@``   their values read from the row ``r``: ``r.id, r.queue, r.headers::json, …``
                         (PostgreSQL; the cast is the column's ``insert_cast``)
  ``@task_params@``      their values as parameters: ``:id, :queue, …`` (SQLite)
  ``@task_arrays@``      one typed array parameter per column: ``:id_array::text[], …``
                         (PostgreSQL's unnest)
  ``@task_fields@``      every column's name, in ``@task_arrays@`` order (the unnest's aliases)

- ``postgres_arrays`` and ``sqlite_params`` build the parameters those placeholders name.

A column whose value a statement works out itself (``run_at``: a task held by an open
breaker is stored at HELD_UNTIL) is declared ``copied=False``: it is among the parameters
and the unnest, and each statement writes its own expression for it. Columns no NewTask
gives (status, created_at, attempts, the lease's) stay written in the statements.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from workly.json_text import to_json
from workly.models import NewTask
from workly.storage.rows import stop_on_text

Dialect = Literal["postgres", "sqlite"]


@dataclass(frozen=True, slots=True)
class TaskColumn:
    name: str  # the tasks column, and the NewTask attribute read unless ``encode`` says otherwise
    pg_type: str  # the element type of its PostgreSQL array (timestamptz: microseconds in SQLite)
    encode: Callable[[NewTask], Any] | None = None  # None: the attribute as it is
    insert_cast: str | None = None  # PostgreSQL: the value cast on insert (text → json)
    copied: bool = True  # False: each statement writes its own expression for it

    def value(self, task: NewTask) -> Any:
        return getattr(task, self.name) if self.encode is None else self.encode(task)

    @property
    def array(self) -> str:
        """The name of its PostgreSQL array parameter."""
        return f"{self.name}_array"


# In the order of the unnest's arrays and the INSERTs' columns (the statements' answers read
# the columns by name: the order matters to nothing else).
TASK_COLUMNS: tuple[TaskColumn, ...] = (
    TaskColumn("id", "text"),
    TaskColumn("queue", "text"),
    TaskColumn("url", "text"),
    TaskColumn("method", "text"),
    TaskColumn("headers", "text", lambda t: to_json(t.headers), insert_cast="json"),
    TaskColumn("body", "bytea"),
    TaskColumn("run_at", "timestamptz", copied=False),  # None: due now; held behind a breaker
    TaskColumn("priority", "int"),
    TaskColumn("key", "text"),
    TaskColumn("tenant", "text"),
    TaskColumn("idempotency_key", "text"),
    TaskColumn("max_attempts", "int"),
    TaskColumn("timeout", "float8"),
    TaskColumn("event_id", "text"),
    TaskColumn("endpoint_id", "text"),
    TaskColumn("breaker", "text"),
    TaskColumn("stop_on", "text", lambda t: stop_on_text(t.stop_on)),
    TaskColumn("deadline", "float8"),
    TaskColumn("min_backoff", "float8"),
    TaskColumn("max_backoff", "float8"),
    TaskColumn("callback_url", "text"),
    TaskColumn("failure_callback_url", "text"),
    TaskColumn("callback_of", "text"),
    TaskColumn("traceparent", "text"),
    TaskColumn("tracestate", "text"),
)
_COPIED = tuple(c for c in TASK_COLUMNS if c.copied)


def postgres_arrays(tasks: Sequence[NewTask]) -> dict[str, list[Any]]:
    """``@task_arrays@``' parameters: one array per column, to unnest in one statement."""
    return {c.array: [c.value(t) for t in tasks] for c in TASK_COLUMNS}


def sqlite_params(task: NewTask, to_us: Callable[[datetime], int]) -> dict[str, Any]:
    """``@task_params@``' parameters (and ``:run_at``), times as ``to_us`` stores them."""
    params = {c.name: c.value(task) for c in TASK_COLUMNS}
    for c in TASK_COLUMNS:
        if c.pg_type == "timestamptz" and params[c.name] is not None:
            params[c.name] = to_us(params[c.name])
    return params


def _values(row: str | None, dialect: Dialect) -> str:
    if row is None or not row.isidentifier():
        raise ValueError("@task_values(<row>)@ takes the name of the row to read the values from")
    return ", ".join(
        f"{row}.{c.name}" + (f"::{c.insert_cast}" if c.insert_cast and dialect == "postgres" else "")
        for c in _COPIED
    )


# The placeholders, each given the argument in parentheses (or None) and the dialect.
_EXPANSIONS: dict[str, Callable[[str | None, Dialect], str]] = {
    "task_columns": lambda _, __: ", ".join(c.name for c in _COPIED),
    "task_fields": lambda _, __: ", ".join(c.name for c in TASK_COLUMNS),
    "task_params": lambda _, __: ", ".join(f":{c.name}" for c in _COPIED),
    "task_arrays": lambda _, __: ", ".join(f":{c.array}::{c.pg_type}[]" for c in TASK_COLUMNS),
    "task_values": _values,
}
PLACEHOLDER = re.compile(r"@(\w+)(?:\((\w*)\))?@")


def expand(match: re.Match[str], dialect: Dialect) -> str:
    """The text of one placeholder matched by ``PLACEHOLDER``; an unknown one is an error
    (``@schema@`` is the migrations', never a query's)."""
    name, argument = match.group(1), match.group(2)
    expansion = _EXPANSIONS.get(name)
    if expansion is None:
        raise ValueError(f"unknown placeholder {match.group(0)!r}; known: {sorted(_EXPANSIONS)}")
    if argument is not None and name != "task_values":
        raise ValueError(f"placeholder {match.group(0)!r}: only @task_values(<row>)@ takes an argument")
    return expansion(argument, dialect)
