"""Endpoint content filters: which events an endpoint takes, by their content (docs/webhooks.md).

A filter is a JSON object tested against the event's document ``{"type", "tenant",
"labels", "payload"}`` (no ``payload`` when it is not JSON). All its entries must hold:
paths with conditions, ``{"payload.customer.country": "FR", "labels.region": {"$in": ["eu"]}}``,
and ``"$and": [filter, ...]``, ``"$or": [filter, ...]``, ``"$not": filter``.

- A path is dot-separated keys from ``type``, ``tenant``, ``labels`` or ``payload``; a
  segment of digits is an index into an array, a key into an object (``payload.items.0.sku``).
  A key holding a '.' cannot be reached.
- A condition is a scalar (equality) or an object of operators that must all hold: ``$eq $ne
  $gt $gte $lt $lte`` (order: a number or a string), ``$in $nin`` (scalars), ``$exists``.
- Values of different JSON types never compare: ``{"$ne": 5}`` is false on ``"x"``, true is
  not 1, an array or object equals no scalar. An absent path fails every condition but
  ``$exists: false``. Numbers compare as exact decimals, strings by code point. ``$nin`` is
  set membership: present and equal to none of the items, so unlike ``$ne`` it holds on a
  value of another type.

Limits: 6 levels of $and/$or/$not; 64 conditions and 64 nested filters in all; paths of 8
segments of 64 characters, at most 3 of digits only (each doubles the SQL form); 100 items
in $in/$nin; strings of 1024 characters; 8 KiB of compact JSON; integers of 308 digits, other
numbers doubles (as JSON parsers read them).

``EventFilter.jsonpath`` is ``matches`` for PostgreSQL's ``document @@ jsonpath``: strict mode
(lax unwraps arrays and wraps scalars), ``exists(P ? (test of @))`` per path, where P's errors
(absent key, other type, index out of bounds) make it unknown, never true; ``$not`` and the
whole are ``exists($ ? (E))``, true exactly when E is, so ``!`` sees true or false and ``@@``
never answers NULL. ``{"payload.a": {"$gt": 1}}`` compiles to ``strict exists($ ? (exists(
$."payload"."a" ? (@ > 1))))``; tests/sql/test_filter_jsonpath.py checks both agree.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from workly.filter_checks import (
    array_index,
    check_filter,
    dumps,
    json_text,
)

_ORDER: Final = {"$gt": (">", operator.gt), "$gte": (">=", operator.ge), "$lt": ("<", operator.lt),
                  "$lte": ("<=", operator.le)}  # fmt: skip
_TRUE: Final = "exists($)"
_ABSENT: Final = object()


Test = Callable[[Mapping[str, Any]], bool]
ValueTest = Callable[[str, Any], bool]  # (JSON type, value) of what a path holds


@dataclass(frozen=True, slots=True)
class EventFilter:
    """A checked filter: ``source`` as normalized (shared through the cache: never mutate
    it), ``jsonpath`` for PostgreSQL, and ``matches`` for a document (``filter_document``)."""

    source: dict[str, Any]
    jsonpath: str
    _test: Test = field(repr=False, compare=False)

    def matches(self, document: Mapping[str, Any]) -> bool:
        return self._test(document)


def compile_filter(value: object) -> EventFilter:
    source = check_filter(value)
    test, expression = _compile(source)
    path = "strict exists($)" if expression == _TRUE else f"strict exists($ ? ({expression}))"
    return EventFilter(source, path, test)


@functools.lru_cache(maxsize=4096)
def stored_filter(text: str) -> EventFilter:
    """A filter as ``filter_text`` stored it, compiled once per process: every publish
    tests the filters of the endpoints it reaches."""
    return compile_filter(json.loads(text, parse_float=Decimal))


def filter_text(f: EventFilter) -> str:
    return json_text(f.source)


def filter_json(source: Any) -> Any:
    """The source for a JSON answer: its numbers as the client gave them (ints and floats)."""
    if isinstance(source, dict):
        return {key: filter_json(value) for key, value in source.items()}
    if isinstance(source, list):
        return [filter_json(value) for value in source]
    if isinstance(source, Decimal):
        return float(source)  # exact: check_filter keeps only doubles' decimals
    return source


def filter_document(
    event_type: str, tenant: str | None, labels: Mapping[str, str] | None, payload: bytes, content_type: str
) -> dict[str, Any]:
    """What a filter is tested against. A payload that does not parse is left out, as one
    that is not JSON (publishing checked it; a filter must not break a fan-out)."""
    document: dict[str, Any] = {"type": event_type, "tenant": tenant, "labels": dict(labels or {})}
    if content_type == "application/json":
        for parse_int in (int, Decimal):  # Decimal: an integer beyond Python's 4300 digits
            try:
                document["payload"] = json.loads(payload, parse_float=Decimal, parse_int=parse_int)
                break
            except (ValueError, RecursionError):
                continue
    return document


# Checking


# Compiling: each node gives its Python test and its jsonpath predicate together.


def _compile(node: dict[str, Any]) -> tuple[Test, str]:
    tests: list[Test] = []
    predicates: list[str] = []
    for key, value in node.items():
        if key in ("$and", "$or"):
            parts = [_compile(each) for each in value]
            tests.append(_all([t for t, _ in parts]) if key == "$and" else _any([t for t, _ in parts]))
            predicates.append(_join(" && " if key == "$and" else " || ", [p for _, p in parts]))
        elif key == "$not":
            negated, predicate = _compile(value)
            tests.append(_not(negated))
            predicates.append(f"!exists($ ? ({predicate}))")  # E true or not: never unknown
        else:
            test, predicate = _condition(key, value)
            tests.append(test)
            predicates.append(predicate)
    return _all(tests), _join(" && ", predicates) or _TRUE


def _condition(path: str, condition: Any) -> tuple[Test, str]:
    root, *segments = path.split(".")
    steps = tuple((segment, array_index(segment)) for segment in segments)
    ops = list(condition.items()) if isinstance(condition, dict) else [("$eq", condition)]
    present, absent = any(op != "$exists" or arg for op, arg in ops), ("$exists", False) in ops
    checks = [_value_test(op, arg) for op, arg in ops if op != "$exists"]
    clauses = [_clause(op, arg) for op, arg in ops if op != "$exists"]

    def test(document: Mapping[str, Any]) -> bool:
        value = document.get(root, _ABSENT)
        for key, index in steps:
            if value is _ABSENT:
                break
            if type(value) is dict or isinstance(value, Mapping):
                value = value.get(key, _ABSENT)
            elif index is not None and isinstance(value, list):
                value = value[index] if index < len(value) else _ABSENT
            else:
                value = _ABSENT
        if value is _ABSENT:
            return not present
        if absent:
            return False
        kind, value = _typed(value)
        # map(), not a generator, whose frame cost as much as the checks themselves
        return all(map(operator.call, checks, itertools.repeat(kind), itertools.repeat(value)))

    alternatives = _paths(root, steps)
    predicates: list[str] = []
    if present:
        body = " && ".join(clauses)
        predicates.append(
            " || ".join(f"exists({p} ? ({body}))" if body else f"exists({p})" for p in alternatives)
        )
    if absent:  # in strict mode an absent path's exists() is unknown, a present one's true
        predicates.append("(" + " || ".join(f"exists({p})" for p in alternatives) + ") is unknown")
    return test, _join(" && ", predicates)


def _paths(root: str, steps: tuple[tuple[str, int | None], ...]) -> list[str]:
    """The jsonpath of each reading of the digit segments: ``[3]`` for an array, ``."3"``
    for an object. jsonpath has no union; the reading that does not fit errs (unknown)."""
    accessors = [[f".{dumps(key)}"] + ([] if index is None else [f"[{index}]"]) for key, index in steps]
    return [f"$.{dumps(root)}" + "".join(chosen) for chosen in itertools.product(*accessors)]


def _typed(value: Any) -> tuple[str, Any]:
    """A value's JSON type, named as jsonpath's .type() does, and its comparable form. The
    types are those json.loads gives (exactly: True is no int here); a float, which parsing
    with Decimal never gives, counts as its shortest decimal."""
    cls = type(value)
    if cls is str or cls is int:
        return ("string" if cls is str else "number"), value
    if cls is Decimal:
        return ("number", value) if value.is_finite() else ("other", None)
    if value is None or cls is bool:
        return ("null" if value is None else "boolean"), value
    if isinstance(value, Mapping | list):
        return ("object" if isinstance(value, Mapping) else "array"), value
    if cls is float and math.isfinite(value):
        return "number", Decimal(repr(value))
    return "other", None


def _value_test(op: str, arg: Any) -> ValueTest:
    if op in ("$in", "$nin"):
        by_kind: dict[str, set[Any]] = {}
        for item in arg:
            by_kind.setdefault(_typed(item)[0], set()).add(item)
        sets = {kind: frozenset(items) for kind, items in by_kind.items()}
        outside = op == "$nin"

        def among(kind: str, value: Any) -> bool:
            items = sets.get(kind)  # an array or object is in no set (and is unhashable)
            return (items is not None and value in items) != outside

        return among
    want = _typed(arg)[0]
    if op == "$eq":
        return lambda kind, value: kind == want and value == arg
    if op == "$ne":
        return lambda kind, value: kind == want and value != arg
    order = _ORDER[op][1]
    return lambda kind, value: kind == want and order(value, arg)


def _clause(op: str, arg: Any) -> str:
    """The test of ``@`` (the path's value) in jsonpath; it is true exactly when the Python
    test is: PostgreSQL's comparison of other types is unknown, except with null."""
    if op == "$in":
        return "(" + " || ".join(f"@ == {_literal(item)}" for item in arg) + ")"
    if op == "$nin":  # the negated part must be two-valued: each equality behind its type
        groups: dict[str, list[str]] = {}
        for item in arg:
            groups.setdefault(_typed(item)[0], []).append(f"@ == {_literal(item)}")
        typed = [
            " || ".join(tests) if kind == "null" else f'@.type() == "{kind}" && ({" || ".join(tests)})'
            for kind, tests in groups.items()
        ]
        return "!(" + " || ".join(f"({each})" for each in typed) + ")"
    if op == "$ne":  # null != 1 is true in jsonpath
        return f'(@.type() == "{_typed(arg)[0]}" && @ != {_literal(arg)})'
    return f"@ {'==' if op == '$eq' else _ORDER[op][0]} {_literal(arg)}"


def _literal(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true" if value else "false"
    if isinstance(value, str):
        return dumps(value)
    return str(value)  # int, or Decimal such as 0.1 or 1E+20 (jsonpath takes exponents)


def _join(separator: str, predicates: list[str]) -> str:
    if len(predicates) <= 1:
        return "".join(predicates)
    return separator.join(f"({p})" for p in predicates)


def _all(tests: list[Test]) -> Test:
    if len(tests) == 1:
        return tests[0]

    return lambda document: all(map(operator.call, tests, itertools.repeat(document)))


def _any(tests: list[Test]) -> Test:
    return lambda document: any(map(operator.call, tests, itertools.repeat(document)))


def _not(test: Test) -> Test:
    return lambda document: not test(document)
