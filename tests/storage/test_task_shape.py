"""The task's columns declared once (storage/task_shape.py): the placeholders the SQL files
write, and the parameters both backends build, come from the same declaration."""

from __future__ import annotations

import re
from dataclasses import fields
from datetime import UTC, datetime

import pytest

from workly.models import NewTask
from workly.storage.postgres.enqueue import task_columns
from workly.storage.queries import Query, compile_query, postgres_queries, sqlite_queries
from workly.storage.sqlite.enqueue import task_params
from workly.storage.task_shape import TASK_COLUMNS

TASK = NewTask(
    id="task_1", queue="q", url="http://127.0.0.1:9/", headers={"a": "b"}, body=b"x",
    run_at=datetime(2030, 1, 2, tzinfo=UTC), stop_on=("4xx", "500"),
)  # fmt: skip


def test_every_field_of_a_new_task_is_declared_once() -> None:
    """A NewTask field not declared would be silently dropped by every enqueue."""
    assert [c.name for c in TASK_COLUMNS] == [f.name for f in fields(NewTask)]


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(" ".join(current.split()))
            current = ""
        else:
            current += char
    return [*parts, " ".join(current.split())]


def _named(query: Query) -> str:
    """The query's SQL with its parameters by name again (PostgreSQL's are numbered)."""
    return re.sub(r"\$(\d+)", lambda m: ":" + query.params[int(m.group(1)) - 1], query.sql)


def _inserted(sql: str) -> dict[str, str]:
    """An ``INSERT INTO tasks (…) SELECT …`` statement's columns and the values given them."""
    sql = re.sub(r"--[^\n]*", "", sql)
    found = re.search(r"INSERT INTO tasks \((.*?)\)\s*SELECT (.*?)\n\s*FROM", sql, re.S)
    assert found is not None
    columns, values = _split_top_level(found.group(1)), _split_top_level(found.group(2))
    assert len(columns) == len(values) == len(set(columns))
    return dict(zip(columns, values, strict=True))


@pytest.mark.parametrize(
    ("query", "row"),
    [
        (postgres_queries().enqueue_tasks, "r"),
        (postgres_queries().enqueue_tasks_leasing, "g"),
        (sqlite_queries().enqueue_tasks_insert, None),
    ],
    ids=["enqueue_tasks", "enqueue_tasks_leasing", "enqueue_tasks_insert"],
)
def test_each_enqueue_inserts_every_declared_column(query: Query, row: str | None) -> None:
    inserted = _inserted(_named(query))
    for column in TASK_COLUMNS:
        value = inserted[column.name]
        if not column.copied:  # the statement's own expression, reading the given value
            assert re.search(rf"\b{column.name}\b", value), value
        elif row is None:
            assert value == f":{column.name}"
        else:
            assert value == f"{row}.{column.name}" + (f"::{column.insert_cast}" if column.insert_cast else "")
    assert {"status", "created_at", "updated_at", "held_run_at"} <= inserted.keys()


def test_the_unnest_pairs_each_array_with_its_column() -> None:
    for query in (postgres_queries().enqueue_tasks, postgres_queries().enqueue_tasks_leasing):
        found = re.search(r"unnest\((:id_array.*?)\) WITH ORDINALITY AS r\((.*?)\)", _named(query))
        assert found is not None
        arrays, aliases = found.group(1).split(", "), found.group(2).split(", ")
        assert aliases == [c.name for c in TASK_COLUMNS] + ["ord"]
        assert arrays == [f":{c.array}::{c.pg_type}[]" for c in TASK_COLUMNS]


def test_both_backends_build_their_parameters_from_the_declaration() -> None:
    arrays = task_columns([TASK])
    assert arrays["headers_array"] == ['{"a":"b"}'] and arrays["stop_on_array"] == ["4xx,500"]
    assert arrays["run_at_array"] == [TASK.run_at] and arrays["body_array"] == [b"x"]
    params = task_params(TASK, now_us=7)
    assert params["headers"] == '{"a":"b"}' and params["stop_on"] == "4xx,500"
    assert params["run_at"] == 1893542400000000 and params["now"] == 7  # microseconds
    assert set(arrays) - {"held_until"} == {c.array for c in TASK_COLUMNS}
    assert set(params) - {"now", "held_until"} == {c.name for c in TASK_COLUMNS}


def test_placeholders_in_comments_and_quotes_are_left_alone() -> None:
    query = compile_query("q", "-- @task_columns@\nSELECT '@task_params@', @task_params@", "sqlite")
    assert query.sql.startswith("-- @task_columns@\nSELECT '@task_params@', :id, :queue, ")
    assert query.params[:2] == ("id", "queue")


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT @schema@.tasks", "unknown placeholder '@schema@'"),
        ("SELECT @task_columns(r)@", "only @task_values"),
        ("SELECT @task_values@", "takes the name of the row"),
    ],
)
def test_an_unknown_or_misused_placeholder_fails_the_load(sql: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        compile_query("q", sql, "postgres")
