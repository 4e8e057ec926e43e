"""A filter's jsonpath gives PostgreSQL's ``document @@ jsonpath`` the answer that
``EventFilter.matches`` gives in Python (workly/event_filter.py), for every filter and
document: the table of tests/test_event_filter.py, then generated ones.

The generated filters take most of their paths and values from the documents they are
tested on (else nearly every condition would be false on a missing path), the documents
nest arrays and objects and hold any Unicode (non-BMP, quotes, backslashes, controls), big
integers, exact decimals, booleans and nulls. Each document goes to the server as JSON text
with its decimals written exactly, and Python reads that same text (filter_document).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.test_event_filter import CASES, DOC, RAW, nested
from workly.event_filter import EventFilter, check_filter, compile_filter, filter_document
from workly.filter_checks import OPERATORS

# Whether each document (JSON text) matches its filter's jsonpath; NULL would be a bug too.
MATCHES = """
SELECT d::jsonb @@ p::jsonpath FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(d, p, n) ORDER BY n
"""


@pytest.fixture
async def conn(pg_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(pg_url)
    # jsonpath compares strings by code point in a UTF-8 database (Workly's databases are)
    assert await connection.fetchval("SHOW server_encoding") == "UTF8"
    yield connection
    await connection.close()


def json_text(value: Any) -> str:
    """JSON with Decimals written as they are (1E+20, -0.0, 12.50)."""
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{json_text(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


async def check(conn: asyncpg.Connection, pairs: list[tuple[EventFilter, str]]) -> list[bool]:
    """Both sides' answers for each (filter, document as JSON text), asserted equal."""
    rows = await conn.fetch(MATCHES, [text for _, text in pairs], [f.jsonpath for f, _ in pairs])
    in_python = [f.matches(read(text)) for f, text in pairs]
    wrong = [
        f"filter: {f.source}\njsonpath: {f.jsonpath}\ndocument: {text}\nPython {answer}, SQL {row[0]}"
        for (f, text), answer, row in zip(pairs, in_python, rows, strict=True)
        if row[0] is not answer
    ]
    assert not wrong, "\n\n".join(wrong[:5])
    return in_python


def read(text: str) -> dict[str, Any]:
    """The document as Workly makes it of an event, its payload (if any) as published bytes."""
    parsed = json.loads(text, parse_float=Decimal)
    fields = (parsed["type"], parsed["tenant"], parsed["labels"])
    if "payload" not in parsed:
        return filter_document(*fields, b"\x00\x01", "application/octet-stream")
    return filter_document(*fields, json_text(parsed["payload"]).encode(), "application/json")


async def test_the_table_gets_the_same_answers_in_postgresql(conn: asyncpg.Connection) -> None:
    pairs = [(compile_filter(given_filter), json_text(document)) for given_filter, document, _ in CASES]
    assert await check(conn, pairs) == [expected for _, _, expected in CASES]


async def test_filters_at_the_limits_compile_and_agree_in_postgresql(conn: asyncpg.Connection) -> None:
    """The deepest nesting, the most conditions with the most digit segments (8 readings
    each: the longest jsonpath, 110 KB), the longest strings and the extreme numbers."""
    at_limits = [
        nested(6),
        {f"payload.0.1.2.k{i}": {"$nin": [1, "a", None, True], "$ne": "x"} for i in range(64)},
        {
            "payload.a": "😀" * 1024,
            "$or": [{"payload.b": {"$gt": -1.7976931348623157e308, "$lt": 10**307}}] * 9,
        },
    ]
    every_k = {f"k{i}": "b" for i in range(64)}
    docs = [
        DOC,
        RAW,
        {
            "type": "t",
            "tenant": None,
            "labels": {},
            "payload": [[0, [0, 0, every_k]], {"1": {"2": {"k3": "a"}}}],
        },
        {"type": "t", "tenant": None, "labels": {}, "payload": {"a": "😀" * 1024, "b": 10**306}},
    ]
    answers = await check(conn, [(compile_filter(f), json_text(doc)) for f in at_limits for doc in docs])
    by_filter = [answers[i : i + len(docs)] for i in range(0, len(answers), len(docs))]
    assert by_filter == [[False, False, True, True], [False, False, True, False], [False, False, False, True]]


# Generated documents and filters


COMMON_KEYS = ["a", "b", "0", "1"]  # mostly these: the documents of an example share paths
KEYS = [*COMMON_KEYS, "2", "10", "é", "😀", 'q"\\', "x y", "$in"]
STRINGS = ["", "a", "b", "A", "z", "é", "ë", "ß", "😀", "\uffff", "\U0010ffff",
           '"', "\\", "\n", "\x7f", "\u2028"]  # fmt: skip
DECIMALS = ["0.1", "1.0", "-0.0", "1E+20", "2.5", "12.50", "1E-7", "-3", "0.30000000000000004"]
NOT_JSON = "raw"  # a generated document whose payload is not JSON

unicode_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=6)
strings = st.one_of(st.sampled_from(STRINGS), unicode_text)
keys = st.one_of(
    st.sampled_from(COMMON_KEYS),
    st.sampled_from(COMMON_KEYS),
    st.sampled_from(KEYS),
    unicode_text.filter(lambda k: k != "" and "." not in k),
)
decimals = st.one_of(
    st.sampled_from([Decimal(d) for d in DECIMALS]),
    st.decimals(min_value=-(10**20), max_value=10**20, allow_nan=False, allow_infinity=False, places=3),
)
integers = st.one_of(st.integers(-3, 12), st.integers(-(10**40), 10**40))
scalars = st.one_of(st.none(), st.booleans(), integers, decimals, strings)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=14,
)
objects = st.dictionaries(keys, values, min_size=1, max_size=5)


def document(event_type: str, tenant: str | None, labels: dict[str, str], payload: Any) -> dict[str, Any]:
    made = {"type": event_type, "tenant": tenant, "labels": labels}
    return made if payload is NOT_JSON else {**made, "payload": payload}


documents = st.builds(
    document,
    st.sampled_from(["invoice.paid", "invoice.created", "a"]),
    st.one_of(st.none(), st.sampled_from(["acme", "é"]), strings),
    st.dictionaries(st.sampled_from(["region", "0", "é"]), st.sampled_from(["eu", "us", "é"]), max_size=3),
    st.one_of(objects, objects, values, st.just(NOT_JSON)),
)


def leaves(value: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    """Every (path, value) inside a document, arrays by index."""
    found = [(path, value)]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if "." not in str(key) and str(key) != "" and len(path) < 8:
            found += leaves(item, (*path, str(key)))
    return found


def filter_value(value: Any) -> Any:
    """A document's scalar as a filter may hold it: decimals as the nearest double."""
    return float(value) if isinstance(value, Decimal) else value


def is_scalar(value: Any) -> bool:
    return not isinstance(value, dict | list)


def is_ordered(value: Any) -> bool:
    return isinstance(value, int | float | str) and not isinstance(value, bool)


filter_scalars = st.one_of(
    scalars.map(filter_value), st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.1, 1e20])
)
random_paths = st.builds(
    lambda root, rest: ".".join((root, *rest)),
    st.sampled_from(["type", "tenant", "labels", "payload"]),
    st.lists(st.sampled_from(KEYS), max_size=3),
)


# Operands of every type, to meet values of other types than theirs.
OTHERS = [None, True, False, 0, 1, -1, 0.5, "", "a", "1", "é"]


def neighbours(value: Any) -> list[Any]:
    """A value (as a filter holds it) and values of its type just around it."""
    if isinstance(value, bool) or value is None:
        return [value, not value]
    if isinstance(value, int | float):
        return [value, value + 1, value - 1, -value, value * 10, value / 4]
    if isinstance(value, str):
        return [value, value + "a", value[:-1], value + "😀", value.upper()]
    return OTHERS


def conditions(near: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A condition whose operands are often ``near`` (values about the one at its path)."""
    operands = weighted(near, near, st.sampled_from(OTHERS), filter_scalars)
    ordered = operands.filter(is_ordered)

    def operand(op: str) -> st.SearchStrategy[Any]:
        if op == "$exists":
            return st.booleans()
        if op in ("$in", "$nin"):
            return st.lists(operands, min_size=1, max_size=4)
        return ordered if op in ("$gt", "$gte", "$lt", "$lte") else operands

    operators = st.lists(st.sampled_from(OPERATORS), min_size=1, max_size=3, unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({op: operand(op) for op in chosen})
    )
    return weighted(operands, operators, operators)


def weighted(*choices: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One of the strategies, each as likely: st.one_of flattens the one_of's inside it, so
    that operands of six kinds would outweigh one strategy of operator objects."""
    return st.sampled_from(choices).flatmap(lambda chosen: chosen)


@st.composite
def examples(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A filter and the documents it is tested on; most of its paths lead somewhere in them."""
    docs = draw(st.lists(documents, min_size=1, max_size=5))
    found = [
        (".".join(path), value)
        for doc in docs
        for root, top in doc.items()
        for path, value in leaves(top, (root,))
        if sum(segment.isdigit() for segment in path) <= 3
    ]
    inside = [pair for pair in found if pair[0].startswith("payload.") and is_scalar(pair[1])] or found

    def at(pairs: list[tuple[str, Any]]) -> st.SearchStrategy[tuple[str, Any]]:
        return st.sampled_from(pairs).flatmap(
            lambda pair: st.tuples(
                st.just(pair[0]),
                conditions(st.sampled_from(neighbours(filter_value(pair[1])))),
            )
        )

    # mostly the scalars inside payloads, where the types and values vary
    entries = st.one_of(
        at(inside), at(inside), at(found), st.tuples(random_paths, conditions(filter_scalars))
    )
    plain = st.lists(entries, min_size=1, max_size=3).map(dict)
    filters = st.recursive(
        plain,
        lambda inner: st.tuples(
            plain,
            st.dictionaries(
                st.sampled_from(["$and", "$or", "$not"]), st.lists(inner, min_size=1, max_size=3), max_size=2
            ),
        ).map(lambda parts: {**parts[0], **{k: v[0] if k == "$not" else v for k, v in parts[1].items()}}),
        max_leaves=8,
    )
    return draw(filters), docs


def parts(source: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The filter, each filter inside it and each of their conditions on its own."""
    yield source
    for key, value in source.items():
        if key in ("$and", "$or"):
            for each in value:
                yield from parts(each)
        elif key == "$not":
            yield from parts(value)
        else:
            yield {key: value}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(examples())
async def test_generated_filters_get_the_same_answers_in_postgresql(
    conn: asyncpg.Connection, example: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    """The filter, its parts and their negations (where an unknown would show) on each
    document, in one query."""
    given_filter, docs = example
    try:
        whole = check_filter(given_filter)
    except ValueError:
        assume(False)  # past a limit (nesting, size): refused, so never compiled
        return
    compiled: dict[str, EventFilter] = {}
    for part in parts(whole):
        for each in (part, {"$not": part}):
            with contextlib.suppress(ValueError):  # the whole, negated, may nest too deep
                made = compile_filter(each)
                compiled[made.jsonpath] = made
    texts = [json_text(doc) for doc in docs]
    await check(conn, [(made, text) for made in compiled.values() for text in texts])
