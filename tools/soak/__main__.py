"""``python -m tools.soak``: hours of mixed load under faults, then the books balanced.

    .venv/bin/python -m tools.soak -backend postgres -processes 3 -duration 30m -rate 500 -out soak-pg
    .venv/bin/python -m tools.soak -backend sqlite -duration 10m -rate 300 -out soak-sqlite

It needs the dev install (``pip install -e '.[dev]'``: matplotlib for the plot). Exits 0 when
the books balance (tools/soak/books.py), 1 on any violation, 2 when the soak itself could not
run. The report is ``report.txt`` (also printed), ``report.json`` and ``soak.png`` in ``-out``
(default soak-out); each Workly process's log is ``workly-<n>.log`` there. Stalls of the
machine or of the soak's own event loop (tools/soak/stalls.py) are listed apart from the faults.

A run lasts its -duration plus the drain (at most -drain, 5 minutes). Retention runs every
minute in each process: a run shorter than -retention plus a minute deletes nothing, and the
books' check of deleted tasks then has nothing to check. The soak keeps every delivery's
record in memory for the books: about 1 GiB for 30 minutes at 500/s. PostgreSQL runs as a
cluster of the soak's own (initdb and pg_ctl from PATH or /usr/lib/postgresql/*/bin; as root
it runs them as the postgres user), in the system's temporary directory, removed at the end
unless -keep.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from tools.loadtest.__main__ import duration
from tools.soak.run import Soak, SoakSettings, command_line

_FAULTS = {"kill", "pause", "database"}


def parse_args(argv: list[str]) -> SoakSettings:
    parser = argparse.ArgumentParser(prog="soak", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "-backend", choices=["postgres", "sqlite"], default="postgres",
        help="postgres (default: a cluster of the soak's own, or -database-url) or sqlite",
    )  # fmt: skip
    parser.add_argument(
        "-processes", type=int, default=3, help="workly serve processes (PostgreSQL; default 3)"
    )
    parser.add_argument("-duration", type=duration, default=1800.0, help="load time (default 30m)")
    parser.add_argument("-rate", type=float, default=500.0, help="sends per second (default 500)")
    parser.add_argument("-concurrency", type=int, default=256, help="sends in flight at most (default 256)")
    parser.add_argument("-burst-every", type=duration, default=60.0, help="a batch enqueue this often (60s)")
    parser.add_argument("-burst-size", type=int, default=500, help="tasks per burst (default 500)")
    parser.add_argument("-fault-every", type=duration, default=120.0, help="a fault this often (default 2m)")
    parser.add_argument(
        "-faults", default=None,
        help="comma-separated turns of kill,pause,database (default: all three; sqlite: kill,pause)",
    )  # fmt: skip
    parser.add_argument("-outage", type=duration, default=180.0, help="receiver outage length (3m; 0: none)")
    parser.add_argument("-retention", type=duration, default=120.0, help="WORKLY_RETENTION (default 2m)")
    parser.add_argument(
        "-failed-retention", type=duration, default=300.0, help="WORKLY_FAILED_RETENTION (default 5m)"
    )
    parser.add_argument("-sample-every", type=duration, default=10.0, help="sampling interval (default 10s)")
    parser.add_argument("-drain", type=duration, default=300.0, help="longest wait for the backlog (5m)")
    parser.add_argument("-database-url", default=None, help="an existing PostgreSQL (no database faults)")
    parser.add_argument("-out", type=Path, default=Path("soak-out"), help="report directory (soak-out)")
    parser.add_argument("-keep", action="store_true", help="keep the soak's PostgreSQL cluster directory")
    parser.add_argument("-seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.faults is None:
        faults = ["kill", "pause"] if args.backend == "sqlite" or args.database_url else sorted(_FAULTS)
    else:
        faults = [name for name in args.faults.split(",") if name]
    if unknown := set(faults) - _FAULTS:
        parser.error(f"unknown faults: {', '.join(sorted(unknown))}")
    if "database" in faults and (args.backend == "sqlite" or args.database_url):
        parser.error("database restarts need the soak's own PostgreSQL cluster")
    if args.rate <= 0 or args.processes < 1 or args.duration <= 0:
        parser.error("-rate and -duration must be > 0, -processes >= 1")
    return SoakSettings(
        backend=args.backend, processes=1 if args.backend == "sqlite" else args.processes,
        duration=args.duration, rate=args.rate, concurrency=args.concurrency, burst_every=args.burst_every,
        burst_size=args.burst_size, fault_every=args.fault_every, faults=faults, outage=args.outage,
        retention=args.retention, failed_retention=args.failed_retention, sample_every=args.sample_every,
        drain=args.drain,
        database_url=args.database_url, out=args.out, keep=args.keep, seed=args.seed,
        command=command_line(argv),
    )  # fmt: skip


def main(argv: list[str]) -> int:
    settings = parse_args(argv)
    try:
        text, books = asyncio.run(Soak(settings).run())
    except (RuntimeError, OSError, LookupError) as exc:
        print(f"soak: could not run: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 1 if books.violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
