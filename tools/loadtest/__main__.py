"""``python -m tools.loadtest -rate 1000 -duration 20s``: the load test with the single-dash
options the benchmarks (tools/bench/compare.sh) and docs/performance.md use. It is
`workly loadtest` (workly/loadtest), which the quick-start install has too."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path

from workly.loadtest import LoadTest, LoadTestError, run_load_test

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)?$")


def duration(text: str) -> float:
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 20s, 500ms, 1m)")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="loadtest", description=__doc__.split("\n\n")[0])
    parser.add_argument("-rate", type=float, default=1000, help="tasks per second (default 1000)")
    parser.add_argument("-duration", type=duration, default=20.0, help="steady state (default 20s)")
    parser.add_argument("-warmup", type=duration, default=5.0, help="warm-up at the same rate (default 5s)")
    parser.add_argument("-concurrency", type=int, default=64, help="enqueue requests in flight (default 64)")
    parser.add_argument("-url", default="http://127.0.0.1:7337", help="the Workly server")
    parser.add_argument("-token", default=None, help="API bearer token, if the server wants one")
    parser.add_argument("-queue", default="loadtest", help="queue to recreate and use (default loadtest)")
    parser.add_argument("-drain", type=duration, default=60.0, help="how long to wait for stragglers")
    parser.add_argument("-ceiling", type=duration, default=0.0, help="also measure a bare client")
    parser.add_argument("-json", dest="json_file", default=None, help="write the results as JSON here")
    parser.add_argument("-quiet", action="store_true", help="no progress line")
    parser.add_argument("-keep", action="store_true", help="leave the queue and its tasks in the server")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.concurrency < 1:
        parser.error("-rate must be > 0 and -concurrency >= 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    test = LoadTest(
        server=args.url.rstrip("/"), token=args.token, rate=args.rate, duration=args.duration,
        warmup=args.warmup, concurrency=args.concurrency, queue=args.queue, drain=args.drain,
        ceiling=args.ceiling, quiet=args.quiet, keep=args.keep,
    )  # fmt: skip
    try:
        report, summary = asyncio.run(run_load_test(test))
    except LoadTestError as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return 1
    print(report.table())
    print(f"\n{summary}")
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(report.as_json(), indent=2) + "\n")
    return 1 if report.lost or report.enqueue_errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
