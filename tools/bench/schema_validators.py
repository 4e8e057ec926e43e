"""Which JSON Schema (2020-12) validator Workly validates event payloads with (issue 42).

Validates the same payloads against the same schema with each candidate, compiled once,
formats asserted, remote references refused, and prints CPU µs per valid and per invalid
payload (median of rounds), and the cost of compiling the schema::

    python -m tools.bench.schema_validators [--rounds 7] [--n 20000]

Candidates: jsonschema (python-jsonschema, pure Python) and jsonschema-rs (Rust). Both
must be installed (jsonschema is not a Workly dependency: ``pip install jsonschema``).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["id", "amount", "currency", "customer", "paid_at"],
    "properties": {
        "id": {"type": "string", "pattern": "^in_[A-Za-z0-9]+$"},
        "amount": {"type": "integer", "minimum": 0},
        "currency": {"enum": ["EUR", "USD", "GBP"]},
        "paid_at": {"type": "string", "format": "date-time"},
        "customer": {"$ref": "#/$defs/customer"},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}, "maxItems": 100},
    },
    "$defs": {
        "customer": {
            "type": "object",
            "required": ["id", "email"],
            "properties": {
                "id": {"type": "string"},
                "email": {"type": "string", "format": "email"},
                "country": {"type": "string", "minLength": 2, "maxLength": 2},
            },
        },
        "line": {
            "type": "object",
            "required": ["sku", "quantity"],
            "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
        },
    },
}
VALID = {
    "id": "in_1NuE2x",
    "amount": 4200,
    "currency": "EUR",
    "paid_at": "2026-12-07T10:00:00Z",
    "customer": {"id": "cus_9", "email": "ada@example.com", "country": "NL"},
    "lines": [{"sku": f"sku-{i}", "quantity": i + 1} for i in range(5)],
}
INVALID = {**VALID, "amount": -1, "customer": {"id": "cus_9", "email": "not an email"}}


def _jsonschema() -> tuple[Callable[[], Any], Callable[[Any], list[str]]]:
    import jsonschema

    def compile_() -> Any:
        return jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())

    def check(validator: Any) -> Callable[[Any], list[str]]:
        return lambda payload: [e.message for e in validator.iter_errors(payload)]

    validator = compile_()
    return compile_, check(validator)


def _jsonschema_rs() -> tuple[Callable[[], Any], Callable[[Any], list[str]]]:
    import jsonschema_rs

    def compile_() -> Any:
        return jsonschema_rs.Draft202012Validator(SCHEMA, validate_formats=True, offline=True)

    validator = compile_()

    def check(payload: Any) -> list[str]:
        if validator.is_valid(payload):  # the common case: no error objects made
            return []
        return [e.message for e in validator.iter_errors(payload)]

    return compile_, check


def _per_call_us(fn: Callable[[], Any], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{'validator':<16} {'valid µs':>10} {'invalid µs':>11} {'compile µs':>11}")
    for name, make in (("jsonschema", _jsonschema), ("jsonschema-rs", _jsonschema_rs)):
        compile_, check = make()
        assert check(VALID) == [], name
        assert len(check(INVALID)) == 2, (name, check(INVALID))
        valid, invalid, compiled = [], [], []
        for _ in range(args.rounds):
            valid.append(_per_call_us(functools.partial(check, VALID), args.n))
            invalid.append(_per_call_us(functools.partial(check, INVALID), args.n // 4))
            compiled.append(_per_call_us(compile_, 200))
        print(
            f"{name:<16} {statistics.median(valid):>10.1f} {statistics.median(invalid):>11.1f} "
            f"{statistics.median(compiled):>11.1f}"
        )


if __name__ == "__main__":
    main()
