"""The soak's report: a text summary, ``report.json`` with every sample, and ``soak.png``.

``python -m tools.soak.report DIR`` draws ``DIR/soak.png`` again from ``DIR/report.json``.

The summary gives the books and, per fifth of the run, the medians of the samples taken in
it (throughput, latency, claim time, backlog, memory, table sizes), so that growth shows
as a trend between the columns rather than as one number.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.soak.books import Books
from tools.soak.faults import Fault
from tools.soak.monitor import Sample
from tools.soak.receiver import KEY_HOLD

PERIODS = 5


@dataclass
class Run:
    """What the report describes besides the books and the samples."""

    backend: str
    processes: int
    duration: float
    rate: float
    retention: float
    started: str  # UTC, ISO 8601
    command: str
    sent: dict[str, int]
    accepted: int
    given_up: int
    retried: int
    drain_seconds: float
    max_in_flight: dict[str, int]
    limits: dict[str, int]
    failed_retention: float = 0.0  # 0: kept (the reports from before issue 43 have none)


def write(
    directory: Path, run: Run, books: Books, samples: list[Sample], faults: list[Fault],
    stalls: list[Fault], began: float,
) -> str:  # fmt: skip
    """``stalls``: those the soak saw (tools/soak/stalls.py), apart from the planned faults."""
    text = summary(run, books, samples, faults, stalls, began)
    (directory / "report.txt").write_text(text)
    document = {
        "run": run.__dict__, "books": books.as_json(), "per_delivery": per_task(samples),
        "samples": [s.as_json() for s in samples],
        "faults": [_fault_json(f, began) for f in faults],
        "stalls": [_fault_json(s, began) | {"excuses": s.may_duplicate} for s in stalls],
    }  # fmt: skip
    (directory / "report.json").write_text(json.dumps(document, indent=1) + "\n")
    plot(directory / "soak.png", run, samples, faults, stalls, began)
    return text


def _fault_json(fault: Fault, began: float) -> dict[str, Any]:
    return {
        "kind": fault.kind, "target": fault.target, "error": fault.error,
        "began_s": None if fault.began is None else round(fault.began - began, 1),
        "seconds": None if fault.began is None or fault.ended is None
        else round(fault.ended - fault.began, 1),
    }  # fmt: skip


def summary(
    run: Run, books: Books, samples: list[Sample], faults: list[Fault], stalls: list[Fault], began: float
) -> str:
    sent = " ".join(f"{kind} {count:,}" for kind, count in sorted(run.sent.items()))
    states = ", ".join(f"{state} {count:,}" for state, count in sorted(books.by_state.items()))
    limits = ", ".join(
        f"{queue} {run.max_in_flight.get(queue, 0)} (limit {limit})" for queue, limit in run.limits.items()
    )
    lines = [
        f"Workly soak: {run.backend}, {run.processes} process(es), {run.duration:.0f} s at {run.rate:g}/s, "
        f"retention {run.retention:g} s (failed {run.failed_retention:g} s), started {run.started}",
        f"command: {run.command}",
        f"sent: {sum(run.sent.values()):,} ({sent}); accepted {run.accepted:,}; "
        f"never acknowledged {run.given_up:,}; sent again after an error {run.retried:,}",
        f"deliveries accepted: {books.deliveries:,}: {states}; "
        f"drained in {run.drain_seconds:.0f} s after the load",
        f"lost {len(books.lost)} · unfinished {len(books.unfinished)} · unexpected failures "
        f"{len(books.unexpected_failures)} · database/receiver disagreements {len(books.disagreements)}",
        f"duplicates: {books.duplicates:,} ({books.excused_duplicates:,} within a fault's window, "
        f"{books.excused_by_stall:,} within a stall's, {len(books.unexcused_duplicates)} not)",
        f"breaches: {dict(books.breaches) or 'none'} (excused after a clock jump, or, but for "
        f"overlaps, a continued process: {dict(books.excused_breaches) or 'none'})",
        f"ordering keys: {books.keyed_requests:,} requests, each held {KEY_HOLD * 1000:.0f} ms; at most "
        f"{books.max_key_in_flight} of one key in flight at the receiver at once",
        f"most in flight: {limits}",
        "faults:",
        *(
            f"  {f.began - began if f.began else f.at:7.1f}s  {f.kind:<8} {f.target:<28} "
            f"{(f.ended or 0) - (f.began or 0):6.1f}s{'  FAILED: ' + f.error if f.error else ''}"
            for f in faults
        ),
        "stalls seen (tools/soak/stalls.py):" + ("" if stalls else " none"),
        *(
            f"  {(s.began or 0) - began:7.1f}s  {s.target:<8} {(s.ended or 0) - (s.began or 0):6.1f}s  "
            + ("long enough to excuse duplicates" if s.may_duplicate else "excuses nothing")
            for s in stalls
        ),
        "",
        *_periods(samples),
        "",
        *_size_trend(samples),
        "",
        *_per_task(samples),
        "",
    ]
    for title, items in (
        ("lost", books.lost), ("unfinished", books.unfinished),
        ("unexpected failures", books.unexpected_failures),
        ("disagreements", books.disagreements), ("unexcused duplicates", books.unexcused_duplicates),
        ("unexcused breaches", books.unexcused_breaches), ("faults that failed", books.failed_faults),
        ("refused sends (4xx)", books.refused), ("the soak's own errors", books.soak_errors),
        ("events not fanned out to the endpoints they match", books.fan_out),
    ):  # fmt: skip
        if items:
            lines += [f"{title} ({len(items)}):", *(f"  {item}" for item in items[:20]), ""]
    verdict = "CLEAN" if not books.violations else f"{books.violations} VIOLATION(S)"
    if books.excused_by_stall:
        verdict += f" ({books.excused_by_stall} duplicate(s) excused by stalls the soak saw, not by faults)"
    lines.append(f"verdict: {verdict}")
    return "\n".join(lines) + "\n"


def _periods(samples: list[Sample]) -> list[str]:
    """Medians per fifth of the run, one column each."""
    if not samples:
        return ["no samples"]
    end = samples[-1].t
    groups = [
        [s for s in samples if i * end / PERIODS <= s.t < (i + 1) * end / PERIODS] for i in range(PERIODS)
    ]
    groups[-1] += [s for s in samples if s.t >= end]
    rows: list[tuple[str, Callable[[Sample], float | None]]] = [
        ("accepted/s", lambda s: s.accepted_per_s),
        ("delivered/s (first 2xx)", lambda s: s.delivered_per_s),
        ("latency p50 ms", lambda s: s.latency_p50_ms),
        ("latency p99 ms", lambda s: s.latency_p99_ms),
        ("backlog (ready+running)", lambda s: s.backlog),
        ("claim mean ms", lambda s: s.claim_mean_ms),
        ("claim p99 ms (bucket)", lambda s: s.claim_p99_ms),
    ]
    keys = sorted({k for s in samples for k in s.sizes if k != "error"})
    rows += [(key, _size(key)) for key in keys]
    rss = sorted({k for s in samples for k in s.rss_mib})
    rows += [(f"RSS MiB {name}", _rss(name)) for name in rss]
    cpu = sorted({k for s in samples for k in s.cpu_cores})
    rows += [(f"CPU cores {name}", _cpu(name)) for name in cpu]
    rates = sorted({k for s in samples for k in s.database_per_s})
    rows += [(f"{name}/s", _rate(name)) for name in rates]
    header = f"{'median per fifth of the run':<28}" + "".join(
        f"{f'{i * end / PERIODS:.0f}-{(i + 1) * end / PERIODS:.0f}s':>14}" for i in range(PERIODS)
    )
    out = [header]
    for title, read in rows:
        cells = []
        for group in groups:
            values = [v for v in map(read, group) if v is not None]
            cells.append(f"{statistics.median(values):>14,.2f}" if values else f"{'-':>14}")
        out.append(f"{title:<28}" + "".join(cells))
    return out


TREND_FROM = 600.0  # seconds: the database is filling its retention windows before


def _size_trend(samples: list[Sample]) -> list[str]:
    """Whether the database grows once its windows are full: a least-squares line through its
    size from the tenth minute on, in MiB per hour, with where it started and ended."""
    points = [(s.t, s.sizes["db_mib"]) for s in samples if s.t >= TREND_FROM and "db_mib" in s.sizes]
    if len(points) < 3:
        return ["database size trend: fewer than 3 samples after the tenth minute"]
    times, sizes = [t for t, _ in points], [size for _, size in points]
    slope = statistics.linear_regression(times, sizes).slope * 3600
    return [
        f"database size from minute {TREND_FROM / 60:.0f} to {times[-1] / 60:.0f}: {sizes[0]:,.1f} MiB → "
        f"{sizes[-1]:,.1f} MiB (min {min(sizes):,.1f}, max {max(sizes):,.1f}); least-squares trend "
        f"{slope:+,.1f} MiB/h ({slope / statistics.median(sizes) * 100:+.1f} % of its median size an hour)"
    ]


def _size(key: str) -> Callable[[Sample], float | None]:
    return lambda s: s.sizes.get(key)


def _rss(name: str) -> Callable[[Sample], float | None]:
    return lambda s: s.rss_mib.get(name)


def _cpu(name: str) -> Callable[[Sample], float | None]:
    return lambda s: s.cpu_cores.get(name)


def _rate(name: str) -> Callable[[Sample], float | None]:
    return lambda s: s.database_per_s.get(name)


def per_task(samples: list[Sample]) -> dict[str, float]:
    """Medians over the load's samples (the first left out: it holds the start-up) of what
    each delivery answered 2xx cost: CPU µs by process group, WAL bytes, commits."""
    load = [s for s in samples if s.phase == "load" and s.delivered_per_s > 0][1:]
    costs: dict[str, list[float]] = {}
    for sample in load:
        for name, cores in sample.cpu_cores.items():
            costs.setdefault(f"CPU µs {name}", []).append(cores / sample.delivered_per_s * 1e6)
        for name, rate in sample.database_per_s.items():
            costs.setdefault(name, []).append(rate / sample.delivered_per_s)
    return {name: statistics.median(values) for name, values in costs.items()}


def _per_task(samples: list[Sample]) -> list[str]:
    costs = per_task(samples)
    if not costs:
        return []
    return [
        "per delivery (median of the load's samples):",
        *(f"  {k:<24}{v:>12,.1f}" for k, v in costs.items()),
    ]


def plot(
    path: Path, run: Run, samples: list[Sample], faults: list[Fault], stalls: list[Fault], began: float
) -> None:
    """Faults shaded red, stalls grey; the labels name the faults and the stalls that excuse."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s.t / 60 for s in samples]
    figure, axes = plt.subplots(6, 1, figsize=(13, 17), sharex=True)
    figure.suptitle(f"Workly soak: {run.backend}, {run.processes} process(es), {run.rate:g}/s, {run.started}")
    panels: list[tuple[str, list[tuple[str, list[float | None]]]]] = [
        ("per second", [("accepted", [s.accepted_per_s for s in samples]),
                        ("delivered (first 2xx)", [s.delivered_per_s for s in samples]),
                        ("backlog (ready+running)", [s.backlog for s in samples])]),
        ("enqueue→delivery ms", [("p50", [s.latency_p50_ms for s in samples]),
                                 ("p99", [s.latency_p99_ms for s in samples])]),
        ("claim ms", [("mean", [s.claim_mean_ms for s in samples]),
                      ("p99 (bucket bound)", [s.claim_p99_ms for s in samples])]),
        ("CPU cores", [(name, [s.cpu_cores.get(name) for s in samples])
                       for name in sorted({k for s in samples for k in s.cpu_cores})]),
        # Workly's processes only: the soak's own grows with its ledger, by design (report.txt).
        ("RSS MiB", [(name, [s.rss_mib.get(name) for s in samples])
                     for name in sorted({k for s in samples for k in s.rss_mib if k != "soak"})]),
        ("table size MiB", [(key, [s.sizes.get(key) for s in samples])
                            for key in sorted({k for s in samples for k in s.sizes if k.endswith("_mib")})]),
    ]  # fmt: skip
    for axis, (title, lines) in zip(axes, panels, strict=True):
        for label, values in lines:
            axis.plot(t, [float("nan") if v is None else v for v in values], label=label, linewidth=1)
        axis.set_ylabel(title)
        if title.endswith(" ms"):
            axis.set_yscale("log")
        axis.grid(alpha=0.3)
        # Beside the panel, not in it: inside, it hid the labels of the first faults.
        axis.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, borderaxespad=0)
        for fault, colour in [*((f, "red") for f in faults), *((s, "grey") for s in stalls)]:
            if fault.began is not None:
                start = (fault.began - began) / 60
                end = ((fault.ended or fault.began) - began) / 60
                axis.axvspan(start, max(end, start + 0.05), color=colour, alpha=0.12)
    for fault in [*faults, *(s for s in stalls if s.may_duplicate)]:
        if fault.began is not None:
            label = fault.kind if fault.kind != "stall" else f"stall ({fault.target})"
            for axis in axes:
                where = ((fault.began - began) / 60, 0.97)
                axis.annotate(label, where, xycoords=("data", "axes fraction"),
                              fontsize=6, color="darkred", va="top")  # fmt: skip
    axes[-1].set_xlabel("minutes")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def replot(directory: Path) -> None:
    """Draw soak.png again from report.json (fault times there are relative to the start)."""
    document = json.loads((directory / "report.json").read_text())
    run = Run(**document["run"])
    samples = [Sample(**sample) for sample in document["samples"]]
    faults, stalls = (
        [Fault(f["kind"], f["began_s"] or 0.0, f["target"], f["began_s"],
               None if f["began_s"] is None else f["began_s"] + (f["seconds"] or 0.0), f["error"])
         for f in document.get(key, [])]
        for key in ("faults", "stalls")
    )  # fmt: skip
    plot(directory / "soak.png", run, samples, faults, stalls, 0.0)


if __name__ == "__main__":
    import sys

    replot(Path(sys.argv[1]))
