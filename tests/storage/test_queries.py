"""The named-query files: same names per dialect, loaded once, parsed strictly."""

from __future__ import annotations

import pytest

from workly.storage.queries import POSTGRES_ONLY, load_queries, parse_blocks


def _shared_name(name: str, other: set[str]) -> bool:
    """``name`` is in ``other``, is a part of a query there, or has parts there."""
    return (
        name in other
        or any(name.startswith(base + "_") for base in other)
        or any(part.startswith(name + "_") for part in other)
    )


def test_both_dialects_define_the_same_queries() -> None:
    """Same names; SQLite may run one query as parts named <query>_<part>."""
    postgres, sqlite = load_queries("postgres").names(), load_queries("sqlite").names()
    missing = {name for name in postgres - POSTGRES_ONLY if not _shared_name(name, sqlite)}
    assert not missing, f"Postgres queries with no SQLite twin: {missing}"
    assert not POSTGRES_ONLY & sqlite
    extra = {name for name in sqlite if not _shared_name(name, postgres)}
    assert not extra, f"SQLite queries with no Postgres twin: {extra}"


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
