"""Python function calls per delivered task, by layer: a measure this noisy machine repeats.

    python -m tools.bench.call_counts [-backend sqlite|postgres] [-rate 1000] [-window 5] [-top 25]

CPU time per task moves by 2-3x from hour to hour here (docs/performance.md), so a change
worth a few per cent cannot be seen in it. The number of Python calls a task costs does not
depend on the machine's speed: it is what "fewer Python steps per task" means, counted.

Starts a server (`workly dev` on a fresh SQLite file, or `workly serve` on the PostgreSQL
database ``workly_compare`` at 127.0.0.1, recreated) in a child process that runs every one
of its threads under cProfile from the start, drives it with ``python -m tools.loadtest`` at
``-rate``, and after the warm-up and a few seconds takes two snapshots of the profiles
``-window`` seconds apart (SIGUSR1, SIGUSR2). The tasks delivered between them are read from
the server's ``workly_deliveries_total``. Prints the calls and the profiled time per task
(cProfile's overhead inflates the time, roughly in proportion to the calls), by layer and
for the costliest functions. The calls depend on the rate (group commits and claims take
more tasks per statement under load): compare counts taken at the same rate.
"""

from __future__ import annotations

import argparse
import cProfile
import marshal
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path
from types import FrameType
from typing import Any, cast

from tools.ports import free_port

Stats = dict[tuple[str, int, str], tuple[int, int, float, float, dict[Any, Any]]]
_TOKEN = "call-counts-token-0123456789abcdef"
_PG_URL = "postgresql://postgres@127.0.0.1/workly_compare"


def serve(argv: list[str], out: Path) -> None:
    """In the child: run ``workly ARGV`` with every thread profiled; SIGUSR1 takes the first
    snapshot, SIGUSR2 the second and writes their difference (pstats' format) to ``out``."""
    profilers: list[cProfile.Profile] = []

    def profile_this_thread(frame: FrameType, event: str, arg: object) -> None:
        profiler = cProfile.Profile()
        profilers.append(profiler)
        profiler.enable()  # replaces this hook for the thread that called it

    first: list[Stats] = []

    def on_first(signum: int, frame: FrameType | None) -> None:
        first[:] = [_snapshot(p) for p in profilers]

    def on_second(signum: int, frame: FrameType | None) -> None:
        before = first + [{}] * (len(profilers) - len(first))  # a thread started in between
        total: Stats = {}
        for profiler, start in zip(profilers, before, strict=True):
            _add(total, _subtract(_snapshot(profiler), start))
        out.write_bytes(marshal.dumps(total))

    signal.signal(signal.SIGUSR1, on_first)
    signal.signal(signal.SIGUSR2, on_second)
    threading.setprofile(profile_this_thread)
    main = cProfile.Profile()
    profilers.append(main)
    main.enable()
    sys.argv = ["workly", *argv]
    from workly.cli import main as workly_main

    workly_main()


def _snapshot(profiler: cProfile.Profile) -> Stats:
    profiler.snapshot_stats()  # reads the counts without disabling (cProfile.py)
    return cast(Stats, dict(profiler.stats))  # typeshed types the times as int


def _minus(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(x - y for x, y in zip(a, b, strict=True))


def _subtract(after: Stats, before: Stats) -> Stats:
    """What was counted between two snapshots: per function, and per caller of it."""
    zero: tuple[int, int, float, float, dict[Any, Any]] = (0, 0, 0.0, 0.0, {})
    delta: Stats = {}
    for key, (cc, nc, tt, ct, callers) in after.items():
        b = before.get(key, zero)
        if nc > b[1]:
            was = b[4]
            by_caller = {c: _minus(v, was.get(c, (0,) * len(v))) for c, v in callers.items()}
            delta[key] = (cc - b[0], nc - b[1], tt - b[2], ct - b[3], by_caller)
    return delta


def _add(total: Stats, part: Stats) -> None:
    for key, (cc, nc, tt, ct, callers) in part.items():
        t = total.get(key, (0, 0, 0.0, 0.0, {}))
        merged = dict(t[4])
        for caller, v in callers.items():
            merged[caller] = _minus(merged[caller], tuple(-x for x in v)) if caller in merged else v
        total[key] = (t[0] + cc, t[1] + nc, t[2] + tt, t[3] + ct, merged)


def layer_of(filename: str, function: str) -> str:
    """A profile entry's layer: Workly's package, a library, or a C function by its name."""
    if filename == "~":
        return "C: " + function.split(" of ")[-1].strip("<>' ").split("'")[0][:40]
    path = filename.replace("\\", "/")
    if "/workly/" in path and "site-packages" not in path:
        parts = path.split("/workly/", 1)[1].split("/")
        return "workly/" + (parts[0] if len(parts) > 1 else parts[0].removesuffix(".py"))
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/")[0].removesuffix(".py")
    return "stdlib: " + Path(path).stem


# Time a thread spends waiting, not working: an idle executor thread's wait for work, a lock.
_WAITS = ("<method 'get' of '_queue.SimpleQueue' objects>", "<method 'acquire' of '_thread.lock' objects>")


def _is_own(key: tuple[str, int, str]) -> bool:
    """The snapshots' own work, counted while they are taken."""
    return key[0].endswith("cProfile.py") or "_lsprof.Profiler" in key[2]


def summary(stats: Stats, tasks: int, top: int) -> str:
    """Calls and time per task, by layer and by function; the threads' waits (_WAITS) and
    this tool's own snapshots left out."""
    stats = {k: v for k, v in stats.items() if k[2] not in _WAITS and not _is_own(k)}
    calls = sum(nc for _, nc, _, _, _ in stats.values())
    seconds = sum(tt for _, _, tt, _, _ in stats.values())
    by_layer: Counter[str] = Counter()
    layer_time: defaultdict[str, float] = defaultdict(float)
    for (filename, _, function), (_, nc, tt, _, _) in stats.items():
        layer = layer_of(filename, function)
        by_layer[layer] += nc
        layer_time[layer] += tt
    lines = [
        f"{tasks} tasks delivered in the window: {calls / tasks:.0f} calls per task, "
        f"{seconds / tasks * 1e6:.0f} µs of profiled time per task",
        "",
        "| layer | calls per task | profiled µs per task |",
        "|---|---|---|",
    ]
    for layer in sorted(layer_time, key=layer_time.__getitem__, reverse=True)[:top]:
        lines.append(f"| {layer} | {by_layer[layer] / tasks:.1f} | {layer_time[layer] / tasks * 1e6:.1f} |")
    lines += ["", "| function | calls per task | own µs per task |", "|---|---|---|"]
    costliest = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    for (filename, line, function), (_, nc, tt, _, _) in costliest:
        where = filename if filename == "~" else f"{layer_of(filename, function)}:{line}"
        lines.append(f"| {where} {function[:60]} | {nc / tasks:.2f} | {tt / tasks * 1e6:.1f} |")
    return "\n".join(lines)


def callers_of(stats: Stats, name: str, tasks: int) -> str:
    """Who calls the functions whose name holds ``name``, with calls per task."""
    lines = []
    for (filename, line, function), (_, nc, _, _, callers) in stats.items():
        if name in function:
            lines.append(f"{layer_of(filename, function)}:{line} {function}: {nc / tasks:.2f} per task, from")
            for (cf, cl, cn), v in sorted(callers.items(), key=lambda item: -item[1][0])[:10]:
                lines.append(f"    {layer_of(cf, cn)}:{cl} {cn}: {v[0] / tasks:.2f}")
    return "\n".join(lines)


def _delivered(port: int) -> float:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("workly_deliveries_total{")
    )


def _server_command(backend: str, port: int, work: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    me = [sys.executable, "-m", "tools.bench.call_counts", "-serve", str(out)]
    env = dict(os.environ)
    if backend == "sqlite":
        return [*me, "dev", "--port", str(port), "--db", str(work / "w.db")], env
    subprocess.run(
        ["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-c", "DROP DATABASE IF EXISTS workly_compare",
         "-c", "CREATE DATABASE workly_compare"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    secret = subprocess.run(
        [Path(sys.executable).with_name("workly"), "secret"], check=True, capture_output=True, text=True
    ).stdout.strip()
    env |= {
        "WORKLY_DATABASE_URL": _PG_URL,
        "WORKLY_SIGNING_SECRET": secret,
        "WORKLY_API_TOKENS": _TOKEN,
        "WORKLY_OUTBOUND_ALLOW": "127.0.0.1",
    }
    return [*me, "serve", "--host", "127.0.0.1", "--port", str(port)], env


def _wait_ready(port: int, server: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not become ready in 30 s")


def measure(backend: str, rate: int, window: float, warmup: float, settle: float) -> tuple[Stats, int]:
    """The profile of the window and the tasks delivered in it."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out = work / "profile.marshal"
        command, env = _server_command(backend, port, work, out)
        server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_ready(port, server)
            load = subprocess.Popen(
                [sys.executable, "-m", "tools.loadtest", "-url", f"http://127.0.0.1:{port}", "-token", _TOKEN,
                 "-rate", str(rate), "-warmup", f"{warmup:g}s", "-duration", f"{settle + window + 5:g}s",
                 "-quiet"],
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(warmup + settle)  # the load test's warm-up, then some time at the rate
            start = _delivered(port)
            server.send_signal(signal.SIGUSR1)
            time.sleep(window)
            server.send_signal(signal.SIGUSR2)
            end = _delivered(port)
            load.wait(timeout=settle + window + 120)
            for _ in range(600):
                if out.exists() and out.stat().st_size:
                    break
                time.sleep(0.1)
            stats: Stats = marshal.loads(out.read_bytes())
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=60)
    return stats, round(end - start)


def main() -> None:
    if sys.argv[1:2] == ["-serve"]:  # the child measure() starts: -serve OUT WORKLY_ARGS…
        serve(sys.argv[3:], Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(prog="call_counts", description=__doc__.split("\n\n")[0])
    parser.add_argument("-backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("-rate", type=int, default=1000, help="tasks per second (default 1000)")
    parser.add_argument("-window", type=float, default=5.0, help="seconds counted (default 5)")
    parser.add_argument("-top", type=int, default=25, help="rows per table (default 25)")
    parser.add_argument("-warmup", type=float, default=5.0, help="the load test's warm-up (default 5 s)")
    parser.add_argument("-settle", type=float, default=5.0, help="seconds at the rate before the window")
    parser.add_argument("-callers", metavar="NAME", help="also show who calls the functions named so")
    parser.add_argument("-save", metavar="FILE", help="also write the window's profile here (pstats)")
    args = parser.parse_args()
    stats, tasks = measure(args.backend, args.rate, args.window, args.warmup, args.settle)
    if tasks <= 0:
        raise SystemExit("no task was delivered in the window")
    if args.save:
        Path(args.save).write_bytes(marshal.dumps(stats))
    print(f"{args.backend}, {args.rate}/s, {args.window:g} s window")
    print(summary(stats, tasks, args.top))
    if args.callers:
        print()
        print(callers_of(stats, args.callers, tasks))


if __name__ == "__main__":
    main()
