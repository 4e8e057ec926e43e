"""Endpoint content filters (workly/event_filter.py): what each operator and combination
matches, what is refused and why, and how a filter is normalized, stored and shown.

CASES are checked here in Python and by tests/sql/test_filter_jsonpath.py in PostgreSQL.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pytest

from workly.event_filter import (
    EventFilter,
    check_filter,
    compile_filter,
    filter_document,
    filter_json,
    filter_text,
    stored_filter,
)

DOC: dict[str, Any] = {
    "type": "invoice.paid",
    "tenant": "acme",
    "labels": {"region": "eu", "0": "zero", "é": "accent"},
    "payload": {
        "amount": Decimal("12.50"),
        "count": 3,
        "one": 1,
        "big": 10**30,
        "tiny": Decimal("0.1"),
        "binary": Decimal("0.1000000000000000055511151231257827"),  # the double nearest 0.1
        "name": "Zoë",
        "emoji": "😀",
        "quote": 'say "hi" \\ bye\n',
        "flag": True,
        "none": None,
        "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 0}],
        "map": {"0": "zero-key", "1": {"x": 1}},
        "empty": [],
        "obj": {},
    },
}
RAW: dict[str, Any] = {"type": "file.uploaded", "tenant": None, "labels": {}}  # payload not JSON
ARRAY: dict[str, Any] = {"type": "t", "tenant": None, "labels": {}, "payload": [10, {"0": "k"}, [5]]}

CASES: list[tuple[dict[str, Any], dict[str, Any], bool]] = [
    # equality, with types and exact decimals
    ({}, DOC, True),
    ({"type": "invoice.paid"}, DOC, True),
    ({"type": "invoice.created"}, DOC, False),
    ({"tenant": "acme"}, DOC, True),
    ({"tenant": None}, DOC, False),
    ({"tenant": None}, RAW, True),
    ({"labels.region": "eu"}, DOC, True),
    ({"labels.region": "us"}, DOC, False),
    ({"labels.0": "zero"}, DOC, True),
    ({"labels.é": "accent"}, DOC, True),
    ({"payload.amount": 12.5}, DOC, True),
    ({"payload.amount": "12.5"}, DOC, False),
    ({"payload.count": 3}, DOC, True),
    ({"payload.count": 3.0}, DOC, True),
    ({"payload.flag": True}, DOC, True),
    ({"payload.flag": 1}, DOC, False),
    ({"payload.one": True}, DOC, False),
    ({"payload.none": None}, DOC, True),
    ({"payload.missing": None}, DOC, False),
    ({"payload.big": 10**30}, DOC, True),
    ({"payload.big": 1e30}, DOC, True),  # 1e+30 is exactly 10**30 as a decimal
    ({"payload.tiny": 0.1}, DOC, True),
    ({"payload.binary": 0.1}, DOC, False),  # 0.1 means the decimal 0.1, not the double
    ({"payload.name": "Zoë"}, DOC, True),
    ({"payload.emoji": "😀"}, DOC, True),
    ({"payload.quote": 'say "hi" \\ bye\n'}, DOC, True),
    ({"payload.obj": None}, DOC, False),
    # arrays: indexes, digits as keys, no implicit "contains", no unwrapping
    ({"payload.items.0.sku": "A-1"}, DOC, True),
    ({"payload.items.1.sku": "A-1"}, DOC, False),
    ({"payload.items.1.qty": 0}, DOC, True),
    ({"payload.items.2.sku": {"$exists": False}}, DOC, True),
    ({"payload.items": "A-1"}, DOC, False),
    ({"payload.items.sku": "A-1"}, DOC, False),
    ({"payload.map.0": "zero-key"}, DOC, True),
    ({"payload.map.1.x": 1}, DOC, True),
    ({"payload.0": 10}, ARRAY, True),
    ({"payload.00": 10}, ARRAY, True),
    ({"payload.1.0": "k"}, ARRAY, True),
    ({"payload.2.0": 5}, ARRAY, True),
    ({"payload.3": {"$exists": False}}, ARRAY, True),
    ({"payload.name.0": "Z"}, DOC, False),  # strings are not arrays
    # strings compare by code point, not by a locale
    ({"payload.name": {"$gt": "Zz"}}, DOC, False),
    ({"payload.name": {"$gt": "Zoz"}}, DOC, True),  # ë (U+00EB) after z
    ({"payload.emoji": {"$gt": "\uffff"}}, DOC, True),
    ({"payload.name": {"$lt": "a"}}, DOC, True),  # capitals first
    # $ne: only against a value of the same type
    ({"payload.count": {"$ne": 4}}, DOC, True),
    ({"payload.count": {"$ne": 3}}, DOC, False),
    ({"payload.count": {"$ne": 3.0}}, DOC, False),
    ({"payload.name": {"$ne": 5}}, DOC, False),
    ({"payload.none": {"$ne": 5}}, DOC, False),
    ({"payload.count": {"$ne": None}}, DOC, False),
    ({"payload.none": {"$ne": None}}, DOC, False),
    ({"payload.missing": {"$ne": 1}}, DOC, False),
    ({"payload.items": {"$ne": 1}}, DOC, False),
    ({"payload.obj": {"$ne": None}}, DOC, False),
    ({"payload.flag": {"$ne": False}}, DOC, True),
    ({"payload.flag": {"$ne": 0}}, DOC, False),
    # order
    ({"payload.count": {"$gt": 2}}, DOC, True),
    ({"payload.count": {"$gt": 3}}, DOC, False),
    ({"payload.count": {"$gte": 3}}, DOC, True),
    ({"payload.count": {"$lt": 3}}, DOC, False),
    ({"payload.count": {"$lte": 3.0}}, DOC, True),
    ({"payload.amount": {"$gt": 12.49, "$lt": 12.51}}, DOC, True),
    ({"payload.amount": {"$gt": 12.49, "$lt": 12.5}}, DOC, False),
    ({"payload.amount": {"$gt": "1"}}, DOC, False),
    ({"payload.name": {"$gt": 1}}, DOC, False),
    ({"payload.flag": {"$gt": 0}}, DOC, False),
    ({"payload.none": {"$lt": 1}}, DOC, False),
    ({"payload.items": {"$gte": 0}}, DOC, False),
    ({"payload.big": {"$gt": 1e29}}, DOC, True),
    ({"payload.binary": {"$gt": 0.1}}, DOC, True),
    ({"payload.missing": {"$lt": 1}}, DOC, False),
    # $in and $nin
    ({"type": {"$in": ["a", "invoice.paid"]}}, DOC, True),
    ({"payload.count": {"$in": ["3", True]}}, DOC, False),
    ({"payload.count": {"$in": [3.0]}}, DOC, True),
    ({"payload.none": {"$in": [None]}}, DOC, True),
    ({"payload.one": {"$in": [True]}}, DOC, False),
    ({"payload.flag": {"$in": [1]}}, DOC, False),
    ({"payload.items": {"$in": [1, None]}}, DOC, False),
    ({"payload.missing": {"$in": [None]}}, DOC, False),
    ({"payload.count": {"$nin": [1, 2]}}, DOC, True),
    ({"payload.count": {"$nin": [3]}}, DOC, False),
    ({"payload.count": {"$nin": ["3"]}}, DOC, True),  # set membership: "3" is not 3
    ({"payload.missing": {"$nin": [1]}}, DOC, False),
    ({"payload.items": {"$nin": [1]}}, DOC, True),
    ({"payload.none": {"$nin": [None]}}, DOC, False),
    ({"payload.none": {"$nin": [0, False, ""]}}, DOC, True),
    ({"payload.flag": {"$nin": [1]}}, DOC, True),
    ({"payload.flag": {"$nin": [1, True]}}, DOC, False),
    # $exists
    ({"payload.none": {"$exists": True}}, DOC, True),
    ({"payload.missing": {"$exists": True}}, DOC, False),
    ({"payload.missing": {"$exists": False}}, DOC, True),
    ({"payload.obj": {"$exists": True}}, DOC, True),
    ({"payload.empty": {"$exists": True}}, DOC, True),
    ({"payload.none": {"$exists": False}}, DOC, False),
    ({"payload": {"$exists": False}}, DOC, False),
    ({"payload": {"$exists": False}}, RAW, True),
    ({"payload.a": {"$exists": False}}, RAW, True),
    ({"payload": None}, RAW, False),
    ({"type.x": {"$exists": True}}, DOC, False),
    ({"payload.count": {"$exists": True, "$gt": 1}}, DOC, True),
    ({"payload.count": {"$exists": False, "$gt": 1}}, DOC, False),
    ({"payload.missing": {"$exists": False, "$ne": 1}}, DOC, False),
    # combinations
    ({"$and": [{"type": "invoice.paid"}, {"payload.count": 3}]}, DOC, True),
    ({"$and": [{"type": "invoice.paid"}, {"payload.count": 4}]}, DOC, False),
    ({"$or": [{"type": "x"}, {"payload.count": 3}]}, DOC, True),
    ({"$or": [{"type": "x"}, {"payload.missing": 1}]}, DOC, False),
    ({"$not": {"payload.missing": 1}}, DOC, True),
    ({"$not": {"payload.count": 3}}, DOC, False),
    ({"$not": {"payload.name": {"$ne": 5}}}, DOC, True),
    ({"$not": {"payload.a": 1}}, RAW, True),
    ({"$not": {"$not": {"payload.a": 1}}}, RAW, False),
    ({"type": "invoice.paid", "$not": {"payload.flag": False}}, DOC, True),
    ({"type": "invoice.paid", "$or": [{"tenant": None}, {"payload.flag": False}]}, DOC, False),
    ({"$and": [{}]}, DOC, True),
    ({"$not": {}}, DOC, False),
    (
        {
            "$or": [
                {"$and": [{"type": "invoice.paid"}, {"$not": {"tenant": "acme"}}]},
                {"$not": {"$or": [{"payload.count": {"$lt": 3}}, {"labels.region": {"$exists": False}}]}},
            ]
        },
        DOC,
        True,
    ),
    (
        {
            "$or": [
                {"$and": [{"type": "invoice.paid"}, {"$not": {"tenant": "acme"}}]},
                {"$not": {"tenant": "acme"}},
            ]
        },
        DOC,
        False,
    ),
    # the extremes of what a filter may hold
    ({"payload.count": {"$lt": 1.7976931348623157e308, "$gt": -1.7976931348623157e308}}, DOC, True),
    ({"payload.count": {"$gt": 5e-324}}, DOC, True),
    ({"payload.big": {"$lt": 10**307}}, DOC, True),
]


def case_id(case: tuple[dict[str, Any], dict[str, Any], bool]) -> str:
    return json.dumps(case[0], ensure_ascii=False)[:60]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_a_filter_matches_what_the_contract_says(case: tuple[dict[str, Any], dict[str, Any], bool]) -> None:
    given, document, expected = case
    assert compile_filter(given).matches(document) is expected


MALFORMED: list[tuple[object, str]] = [
    ([], "filter: a filter must be a JSON object"),
    ("type", "filter: a filter must be a JSON object"),
    ({1: 2}, "filter: keys must be strings"),
    ({"$and": []}, "filter: $and takes a non-empty list of filters"),
    ({"$or": {}}, "filter: $or takes a non-empty list of filters"),
    ({"$or": [{}, 5]}, "filter.$or[1]: a filter must be a JSON object"),
    ({"$not": []}, "filter.$not: a filter must be a JSON object"),
    ({"$nor": []}, "filter: unknown operator $nor (beside paths: $and, $or, $not)"),
    ({"payload.a": {"$regex": "x"}}, "filter.payload.a: unknown operator $regex"),
    ({"payload.a": {"$gt": 1, "b": 2}}, "filter.payload.a: an operator object cannot mix operators and keys"),
    ({"payload.a": {"b": 2}}, "filter.payload.a: objects cannot be compared"),
    ({"payload.a": {}}, "filter.payload.a: an operator object cannot be empty"),
    ({"payload.a": [1]}, "filter.payload.a: arrays cannot be compared (use $in"),
    ({"payload.a": {"$eq": [1]}}, "filter.payload.a: $eq takes a scalar (a string, number, boolean or null)"),
    ({"payload.a": {"$ne": {"b": 1}}}, "filter.payload.a: $ne takes a scalar"),
    (
        {"$or": [{}, {"payload.amount": {"$gt": True}}]},
        "filter.$or[1].payload.amount: $gt takes a number or a string",
    ),
    ({"payload.a": {"$lte": None}}, "filter.payload.a: $lte takes a number or a string"),
    ({"payload.a": {"$lt": [1]}}, "filter.payload.a: $lt takes a number or a string"),
    ({"payload.a": {"$in": []}}, "filter.payload.a: $in takes a non-empty list of at most 100 scalars"),
    ({"payload.a": {"$nin": "ab"}}, "filter.payload.a: $nin takes a non-empty list of at most 100 scalars"),
    ({"payload.a": {"$in": list(range(101))}}, "filter.payload.a: $in takes a non-empty list"),
    ({"payload.a": {"$in": [1, [1]]}}, "filter.payload.a.$in[1]: arrays and objects cannot be compared"),
    ({"payload.a": {"$exists": 1}}, "filter.payload.a: $exists takes true or false"),
    ({"payload.a": {"$exists": "yes"}}, "filter.payload.a: $exists takes true or false"),
    ({"": 1}, "filter.: a path's segments cannot be empty (a key holding '.' cannot be reached)"),
    ({"payload..a": 1}, "filter.payload..a: a path's segments cannot be empty"),
    ({"payload.a.": 1}, "filter.payload.a.: a path's segments cannot be empty"),
    ({"body.a": 1}, "filter.body.a: a path starts with type, tenant, labels or payload"),
    ({"Payload": 1}, "filter.Payload: a path starts with type, tenant, labels or payload"),
    ({"payload.a.b.c.d.e.f.g.h": 1}, "filter.payload.a.b.c.d.e.f.g.h: a path has at most 8 segments"),
    ({"payload." + "k" * 65: 1}, f"filter.payload.{'k' * 65}: a path segment is at most 64 characters"),
    ({"payload.0.1.2.3": 1}, "filter.payload.0.1.2.3: a path has at most 3 segments of digits only"),
    ({"payload.a\x00": 1}, "filter.payload.a\x00: strings cannot hold U+0000"),
    ({"payload.a": "x" * 1025}, "filter.payload.a: strings are at most 1024 characters"),
    ({"payload.a": "\x00"}, "filter.payload.a: strings cannot hold U+0000"),
    ({"payload.a": "\ud800"}, "filter.payload.a: strings must be valid Unicode (no lone surrogates)"),
    ({"payload.a": float("nan")}, "filter.payload.a: NaN and Infinity are not JSON numbers"),
    ({"payload.a": {"$gt": float("inf")}}, "filter.payload.a: NaN and Infinity are not JSON numbers"),
    ({"payload.a": float("-inf")}, "filter.payload.a: NaN and Infinity are not JSON numbers"),
    ({"payload.a": Decimal("NaN")}, "filter.payload.a: NaN and Infinity are not JSON numbers"),
    (
        {"payload.a": Decimal("1E+400")},
        "filter.payload.a: a number with a fraction or exponent must be a double",
    ),
    ({"payload.a": Decimal("0.1000000000000000000001")}, "filter.payload.a: a number with a fraction"),
    ({"payload.a": 10**308}, "filter.payload.a: integers have at most 308 digits"),
    ({"payload.a": object()}, "filter.payload.a: object is not a JSON value"),
    ({"payload.a": (1,)}, "filter.payload.a: tuple is not a JSON value"),
    ({"payload.a": {"$in": ["x" * 1000] * 9}}, "filter: longer than 8 KiB as compact JSON (9050 bytes)"),
    (
        {"$not": {"$and": [{"$or": [{"payload.a": {"$in": [{}]}}]}]}},
        "filter.$not.$and[0].$or[0].payload.a.$in[0]:",
    ),
]


@pytest.mark.parametrize(("given", "message"), MALFORMED, ids=[m for _, m in MALFORMED])
def test_a_malformed_filter_is_refused_saying_where(given: object, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        compile_filter(given)


def nested(levels: int) -> dict[str, Any]:
    inner: dict[str, Any] = {"type": "t"}
    for level in range(levels):
        inner = (
            {"$not": inner} if level % 3 == 0 else {"$and": [inner]} if level % 3 == 1 else {"$or": [inner]}
        )
    return inner


def test_nesting_stops_at_six_levels() -> None:
    assert compile_filter(nested(6)).matches({"type": "t"}) is True  # three $not around it
    with pytest.raises(ValueError, match=re.escape("filter.$not.$or[0].$and[0].$not.$or[0].$and[0].$not: ")):
        compile_filter(nested(7))


def test_conditions_and_nested_filters_stop_at_sixty_four() -> None:
    many = {f"payload.k{i}": i for i in range(64)}
    assert compile_filter(many).matches({"payload": {f"k{i}": i for i in range(64)}}) is True
    with pytest.raises(ValueError, match=re.escape("filter: more than 64 conditions in the filter")):
        compile_filter({**many, "type": "t"})
    spread = {
        "$or": [{"payload.k": i} for i in range(32)],
        "$and": [{"payload.k": {"$ne": i}} for i in range(32)],
    }
    assert compile_filter(spread).matches({"payload": {"k": 40}}) is False
    with pytest.raises(ValueError, match=re.escape("filter.$and[64]: more than 64 nested filters")):
        compile_filter({"$and": [{}] * 65})


def test_the_limits_themselves_are_accepted() -> None:
    compile_filter({"payload.a": "x" * 1024, "payload.0.1.2.b": {"$in": list(range(100))}})
    compile_filter({"payload." + "k" * 64: 1, "payload.a.b.c.d.e.f.g": 10**308 - 1})
    # a long digit segment is only a key (no jsonb array is that long): it does not count
    compile_filter({"payload.0.1.2.1234567890": 1})


def test_floats_become_exact_decimals_and_ints_stay_ints() -> None:
    source = check_filter({"payload.a": 0.1, "payload.b": 3, "payload.c": {"$in": [1.5, 2, 1e20]}})
    assert source == {
        "payload.a": Decimal("0.1"),
        "payload.b": 3,
        "payload.c": {"$in": [Decimal("1.5"), 2, 1e20]},
    }
    assert str(source["payload.a"]) == "0.1" and type(source["payload.b"]) is int
    assert str(source["payload.c"]["$in"][2]) == "1E+20"
    # a Decimal that a double holds is kept as the double's shortest decimal
    assert str(check_filter({"payload.a": Decimal("0.10")})["payload.a"]) == "0.1"


def test_stored_text_is_compact_exact_and_compiled_once() -> None:
    given = {"payload.a": {"$gte": 0.1, "$lt": 1e20}, "labels.région": "😀", "$not": {"tenant": None}}
    compiled = compile_filter(given)
    text = filter_text(compiled)
    assert text == '{"payload.a":{"$gte":0.1,"$lt":1E+20},"labels.région":"😀","$not":{"tenant":null}}'
    stored = stored_filter(text)
    assert stored is stored_filter(text)
    assert stored == compiled and filter_text(stored) == text
    shown = filter_json(stored.source)
    assert shown == given and type(shown["payload.a"]["$gte"]) is float


def test_the_jsonpath_has_the_documented_shape() -> None:
    assert compile_filter({}).jsonpath == "strict exists($)"
    assert compile_filter({"payload.a": {"$gt": 1}}).jsonpath == (
        'strict exists($ ? (exists($."payload"."a" ? (@ > 1))))'
    )
    assert compile_filter({"payload.items.0.sku": {"$ne": "x"}}).jsonpath == (
        'strict exists($ ? (exists($."payload"."items"."0"."sku" ? ((@.type() == "string" && @ != "x")))'
        ' || exists($."payload"."items"[0]."sku" ? ((@.type() == "string" && @ != "x")))))'
    )
    assert compile_filter({"$not": {"tenant": {"$exists": False}}}).jsonpath == (
        'strict exists($ ? (!exists($ ? ((exists($."tenant")) is unknown))))'
    )
    assert compile_filter({"type": {"$nin": ["a", None, 1]}}).jsonpath == (
        'strict exists($ ? (exists($."type" ? (!((@.type() == "string" && (@ == "a"))'
        ' || (@ == null) || (@.type() == "number" && (@ == 1)))))))'
    )


def test_the_document_holds_the_parsed_payload_or_none() -> None:
    document = filter_document("a.b", None, None, b'{"n": 1.50, "i": 7, "s": "\\u00e9"}', "application/json")
    assert document == {
        "type": "a.b",
        "tenant": None,
        "labels": {},
        "payload": {"n": Decimal("1.50"), "i": 7, "s": "é"},
    }
    assert type(document["payload"]["i"]) is int and str(document["payload"]["n"]) == "1.50"
    assert filter_document("a", "t", {"k": "v"}, b"\x00\x01", "application/octet-stream") == {
        "type": "a",
        "tenant": "t",
        "labels": {"k": "v"},
    }
    assert "payload" not in filter_document("a", None, None, b"{nope", "application/json")
    assert filter_document("a", None, None, b"null", "application/json")["payload"] is None
    huge = "9" * 5000  # beyond Python's int() digits: read as a Decimal
    parsed = filter_document("a", None, None, f'{{"n": {huge}}}'.encode(), "application/json")["payload"]["n"]
    assert parsed == Decimal(huge)
    assert compile_filter({"payload.n": {"$gt": 10**307}}).matches({"payload": {"n": parsed}}) is True


def test_hand_made_documents_may_hold_floats() -> None:
    assert compile_filter({"payload.a": 0.1}).matches({"payload": {"a": 0.1}}) is True
    assert (
        compile_filter({"payload.a": {"$exists": True, "$ne": 1}}).matches({"payload": {"a": float("nan")}})
        is False
    )


def test_a_filter_is_a_frozen_value() -> None:
    compiled = compile_filter({"type": "t"})
    assert isinstance(compiled, EventFilter)
    with pytest.raises(AttributeError):
        compiled.jsonpath = "strict true"  # type: ignore[misc]
