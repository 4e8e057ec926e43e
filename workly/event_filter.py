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

ROOTS: Final = ("type", "tenant", "labels", "payload")
OPERATORS: Final = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
MAX_DEPTH: Final = 6
MAX_CONDITIONS: Final = 64
MAX_FILTERS: Final = 64
MAX_ITEMS: Final = 100
MAX_STRING: Final = 1024
MAX_SEGMENT: Final = 64
MAX_SEGMENTS: Final = 8
MAX_DIGIT_SEGMENTS: Final = 3
MAX_TEXT: Final = 8 * 1024
# Longer digit segments are keys only: jsonpath subscripts are 32-bit, and no jsonb array
# has a billion elements, so both sides find nothing there as an index anyway.
_INDEX_DIGITS: Final = 9
_INT_LIMIT: Final = 10**308
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
    return _json_text(f.source)


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


def check_filter(value: object) -> dict[str, Any]:
    """The filter normalized (floats as ``Decimal(repr(f))``), or ValueError naming where."""
    normalized = _check(value, "filter", 0, [0, 0])
    size = len(_json_text(normalized).encode())
    if size > MAX_TEXT:
        raise ValueError(f"filter: longer than 8 KiB as compact JSON ({size} bytes)")
    return normalized


def _check(value: object, where: str, depth: int, counts: list[int]) -> dict[str, Any]:
    """counts: conditions and nested filters so far, in the whole filter."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: a filter must be a JSON object")
    normalized: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValueError(f"{where}: keys must be strings")
        if key in ("$and", "$or"):
            if not isinstance(item, list) or not item:
                raise ValueError(f"{where}: {key} takes a non-empty list of filters")
            items = enumerate(item)
            normalized[key] = [_nested(each, f"{where}.{key}[{i}]", depth, counts) for i, each in items]
        elif key == "$not":
            normalized[key] = _nested(item, f"{where}.$not", depth, counts)
        elif key.startswith("$"):
            raise ValueError(f"{where}: unknown operator {_shown(key)} (beside paths: $and, $or, $not)")
        else:
            counts[0] += 1
            if counts[0] > MAX_CONDITIONS:
                raise ValueError(f"{where}: more than {MAX_CONDITIONS} conditions in the filter")
            here = f"{where}.{_shown(key)}"
            _check_path(key, here)
            normalized[key] = _check_condition(item, here)
    return normalized


def _nested(value: object, where: str, depth: int, counts: list[int]) -> dict[str, Any]:
    if depth >= MAX_DEPTH:
        raise ValueError(f"{where}: $and, $or and $not nest at most {MAX_DEPTH} levels deep")
    counts[1] += 1
    if counts[1] > MAX_FILTERS:
        raise ValueError(f"{where}: more than {MAX_FILTERS} nested filters in the filter")
    return _check(value, where, depth + 1, counts)


def _check_path(path: str, where: str) -> None:
    segments = path.split(".")
    if len(segments) > MAX_SEGMENTS:
        raise ValueError(f"{where}: a path has at most {MAX_SEGMENTS} segments")
    if "" in segments:
        raise ValueError(f"{where}: a path's segments cannot be empty (a key holding '.' cannot be reached)")
    if segments[0] not in ROOTS:
        raise ValueError(f"{where}: a path starts with type, tenant, labels or payload")
    for segment in segments:
        if len(segment) > MAX_SEGMENT:
            raise ValueError(f"{where}: a path segment is at most {MAX_SEGMENT} characters")
        _check_string(segment, where)
    if sum(_index(segment) is not None for segment in segments) > MAX_DIGIT_SEGMENTS:
        raise ValueError(f"{where}: a path has at most {MAX_DIGIT_SEGMENTS} segments of digits only")


def _check_condition(value: object, where: str) -> Any:
    if isinstance(value, list):
        raise ValueError(f"{where}: arrays cannot be compared (use $in for one of several values)")
    if not isinstance(value, dict):
        return _scalar(value, where)
    if not value:
        raise ValueError(f"{where}: an operator object cannot be empty")
    named = [key for key in value if isinstance(key, str) and key.startswith("$")]
    if not named:
        raise ValueError(f"{where}: objects cannot be compared (give a scalar or operators such as $eq)")
    if len(named) != len(value):
        raise ValueError(f"{where}: an operator object cannot mix operators and keys")
    return {op: _check_operator(op, arg, where) for op, arg in value.items()}


def _check_operator(op: str, arg: object, where: str) -> Any:
    if op not in OPERATORS:
        raise ValueError(f"{where}: unknown operator {_shown(op)}")
    if op == "$exists":
        if not isinstance(arg, bool):
            raise ValueError(f"{where}: $exists takes true or false")
        return arg
    if op in ("$in", "$nin"):
        if not isinstance(arg, list) or not 0 < len(arg) <= MAX_ITEMS:
            raise ValueError(f"{where}: {op} takes a non-empty list of at most {MAX_ITEMS} scalars")
        return [_scalar(item, f"{where}.{op}[{i}]") for i, item in enumerate(arg)]
    if op in _ORDER and (isinstance(arg, bool) or not isinstance(arg, int | float | Decimal | str)):
        raise ValueError(f"{where}: {op} takes a number or a string")
    if isinstance(arg, dict | list):
        raise ValueError(f"{where}: {op} takes a scalar (a string, number, boolean or null)")
    return _scalar(arg, where)


def _scalar(value: object, where: str) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) >= _INT_LIMIT:
            raise ValueError(f"{where}: integers have at most 308 digits")
        return int(value)
    if isinstance(value, float | Decimal):
        if not (value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)):
            raise ValueError(f"{where}: NaN and Infinity are not JSON numbers")
        # A double's shortest decimal: what the client wrote, exactly, and what the JSON
        # answer gives back (filter_json); another Decimal would not survive that.
        number = Decimal(repr(float(value)))
        if isinstance(value, Decimal) and number != value:
            raise ValueError(f"{where}: a number with a fraction or exponent must be a double")
        return number
    if isinstance(value, str):
        _check_string(value, where)
        return str(value)  # a subclass (an enum's) would be no "string" to _typed
    if isinstance(value, dict | list):
        raise ValueError(f"{where}: arrays and objects cannot be compared")
    raise ValueError(f"{where}: {type(value).__name__} is not a JSON value")


def _check_string(value: str, where: str) -> None:
    if len(value) > MAX_STRING:
        raise ValueError(f"{where}: strings are at most {MAX_STRING} characters")
    if "\x00" in value:  # PostgreSQL's text cannot hold it, so no jsonb string does
        raise ValueError(f"{where}: strings cannot hold U+0000")
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ValueError(f"{where}: strings must be valid Unicode (no lone surrogates)") from None


def _shown(key: str) -> str:
    return key if len(key) <= 80 else key[:77] + "..."


def _index(segment: str) -> int | None:
    """The array index a segment also means: ASCII digits only (str.isdigit takes '²')."""
    if segment.isascii() and segment.isdigit() and len(segment) <= _INDEX_DIGITS:
        return int(segment)
    return None


def _json_text(value: Any) -> str:
    """Compact JSON with Decimals written as they are (the json module would refuse them)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dumps(key)}:{_json_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(item) for item in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return _dumps(value)


def _dumps(value: Any) -> str:
    # Also a jsonpath literal: its escapes (\" \\ \n \uXXXX) are JSON's; the rest stays raw.
    return json.dumps(value, ensure_ascii=False)


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
    steps = tuple((segment, _index(segment)) for segment in segments)
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
    accessors = [[f".{_dumps(key)}"] + ([] if index is None else [f"[{index}]"]) for key, index in steps]
    return [f"$.{_dumps(root)}" + "".join(chosen) for chosen in itertools.product(*accessors)]


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
        return _dumps(value)
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
