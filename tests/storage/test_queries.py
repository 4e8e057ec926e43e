"""The named-query files: typed names, the same names per dialect, parameters bound by name."""

from __future__ import annotations

from dataclasses import fields

import pytest

from workly.storage.queries import (
    CommonQueries,
    PostgresQueries,
    QueryParameterError,
    SqliteQueries,
    compile_query,
    parse_blocks,
    postgres_queries,
    sqlite_queries,
)

# What SQLite has no use for: cross-process wake-ups, vacuum and index rebuilds, the locks and counters that
# keep queue limits across processes (it runs in one process, with one writer), schemas,
# and the SQL functions' wake-ups and limits (it has no stored functions).
POSTGRES_ONLY = {
    "announce_work", "autovacuum_enabled", "vacuum", "lock_queue_of_task", "delete_queue_releases",
    "lock_queues", "recount_running", "lock_queues_named", "take_sql_arrivals", "sql_arrivals_used",
    "set_sql_limits", "schema_exists", "earlier_install_elsewhere",
    "definitions_owned_by_others",  # SQLite has no owners: one file, one user
    "database_now",  # SQLite is a file of this host: its clock is this host's
    "lock_for_recount", "recount_lock_timeout",  # SQLite's one writer already keeps everyone else out
    "extend_lease",  # SQLite takes no row locks: its extend_leases skips nothing, and serves
    # Deletes rebalance SQLite's B-trees: no index bloat to rebuild.
    "bloated_indexes", "index_leftovers", "cancel_index_rebuilds",
    "lock_erase",  # SQLite's one writer creates one erase at a time by itself
}  # fmt: skip


def names(kind: type[CommonQueries]) -> set[str]:
    return {f.name for f in fields(kind)}


def test_both_dialects_load_every_query_they_declare() -> None:
    assert {f.name for f in fields(postgres_queries())} == names(PostgresQueries)
    assert {f.name for f in fields(sqlite_queries())} == names(SqliteQueries)


def test_a_query_of_one_dialect_only_is_a_part_of_the_others_or_has_no_use_there() -> None:
    """SQLite may run one PostgreSQL query as parts named <query>_<part>."""
    common = names(CommonQueries)
    postgres_only = names(PostgresQueries) - common
    sqlite_only = names(SqliteQueries) - common
    assert postgres_only - POSTGRES_ONLY == {
        base for base in postgres_only if any(part.startswith(base + "_") for part in sqlite_only)
    }
    every_postgres = names(PostgresQueries)
    assert all(any(part.startswith(base + "_") for base in every_postgres) for part in sqlite_only)


def test_queries_are_loaded_once() -> None:
    assert sqlite_queries() is sqlite_queries()
    assert postgres_queries() is postgres_queries()


def test_blocks_are_split_on_name_lines() -> None:
    blocks = parse_blocks("-- name: one\nSELECT 1;\n\n-- name: two\n-- why\nSELECT 2;\n")
    assert blocks == {"one": "SELECT 1;", "two": "-- why\nSELECT 2;"}


def test_a_name_defined_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_blocks("-- name: one\nSELECT 1;\n-- name: one\nSELECT 2;\n")


def test_postgres_parameters_are_numbered_by_name_skipping_casts_comments_and_text() -> None:
    query = compile_query(
        "q",
        "-- :not_a_param in a comment\n"
        "SELECT :now::timestamptz, ':quoted', \":ident\", :limit, :now + interval '1 s' LIMIT :limit",
        "postgres",
    )
    assert query.params == ("now", "limit")
    assert query.sql.endswith(
        "SELECT $1::timestamptz, ':quoted', \":ident\", $2, $1 + interval '1 s' LIMIT $2"
    )
    assert query.args({"limit": 5, "now": "t"}) == ["t", 5]


def test_sqlite_keeps_named_parameters_for_the_driver() -> None:
    query = compile_query("q", "SELECT * FROM t WHERE a = :a AND b = :b", "sqlite")
    assert query.sql == "SELECT * FROM t WHERE a = :a AND b = :b"
    assert query.check({"a": 1, "b": 2}) == {"a": 1, "b": 2}


@pytest.mark.parametrize("values", [{"now": 1}, {"now": 1, "limit": 2, "typo": 3}, {}])
def test_a_call_with_other_parameters_than_the_query_names_is_refused(values: dict[str, int]) -> None:
    query = compile_query("q", "SELECT :now, :limit", "postgres")
    with pytest.raises(QueryParameterError, match="query q"):
        query.args(values)


@pytest.mark.parametrize(
    "sql", ["SELECT $1", "SELECT 1 /* :x */", "SELECT $$ :x $$", "SELECT $body$ :x $body$", "SELECT E'a :x'"]
)
def test_what_the_parameter_reader_cannot_read_safely_is_refused(sql: str) -> None:
    with pytest.raises(ValueError, match="by name"):
        compile_query("q", sql, "postgres")


def test_array_slices_and_identifiers_ending_in_e_are_not_parameters() -> None:
    query = compile_query("q", "SELECT (ARRAY[1,2,3])[1:2], name FROM queue WHERE name = :name", "postgres")
    assert query.params == ("name",)
    assert query.sql == "SELECT (ARRAY[1,2,3])[1:2], name FROM queue WHERE name = $1"


def test_the_claim_queries_take_the_parameters_their_backends_pass() -> None:
    # The claim reads the same four values on both backends, under the same names.
    assert set(postgres_queries().claim_tasks.params) == {"now", "limit", "lease_token", "lease_margin"}
    assert set(sqlite_queries().claim_tasks_plain.params) == {"queue", "now", "limit"}
