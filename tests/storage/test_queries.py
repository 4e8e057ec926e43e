"""The named-query files: same names per dialect, loaded once, parsed strictly."""

from __future__ import annotations

import pytest

from workly.storage.queries import load_queries, parse_blocks


def _shared_name(name: str, shared: set[str]) -> bool:
    return name in shared or any(name.startswith(base + "_") for base in shared)


def test_both_dialects_define_the_same_queries() -> None:
    postgres, sqlite = load_queries("postgres").names(), load_queries("sqlite").names()
    shared = postgres & sqlite
    assert postgres == shared, "every Postgres query has a SQLite twin"
    extra = sqlite - shared
    assert all(_shared_name(name, shared) for name in extra), f"SQLite-only names must be parts: {extra}"


def test_queries_are_loaded_once() -> None:
    assert load_queries("sqlite") is load_queries("sqlite")


def test_blocks_are_split_on_name_lines() -> None:
    blocks = parse_blocks("-- name: one\nSELECT 1;\n\n-- name: two\n-- why\nSELECT 2;\n")
    assert blocks == {"one": "SELECT 1;", "two": "-- why\nSELECT 2;"}


def test_a_name_defined_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_blocks("-- name: one\nSELECT 1;\n-- name: one\nSELECT 2;\n")


def test_an_unknown_query_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_query"):
        _ = load_queries("postgres").no_such_query
