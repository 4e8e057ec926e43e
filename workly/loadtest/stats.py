"""Percentiles and the performance page's table, for `workly loadtest`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile of ``values`` (need not be sorted); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1000
    if ms >= 1000:
        return f"{ms / 1000:.1f} s"
    if ms >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.1f} ms"


@dataclass
class Report:
    rate: float
    duration: float
    sent: int
    enqueue_errors: int
    delivered: int
    lost: int
    duplicates: int
    enqueue_p50: float | None
    enqueue_p99: float | None
    delivery_p50: float | None
    delivery_p95: float | None
    delivery_p99: float | None
    delivered_per_second: float
    sent_per_second: float  # achieved in the steady window: below ``rate`` when the sender fell behind
    backlog_grew: bool
    ceiling_per_second: float | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def row(self) -> str:
        if self.backlog_grew:
            latency = "backlog grows"
        else:
            latency = " / ".join(fmt_ms(v) for v in (self.delivery_p50, self.delivery_p95, self.delivery_p99))
        outcome = "all" if self.lost == 0 else f"{self.lost:,} lost"
        if self.duplicates:
            outcome += f", {self.duplicates:,} duplicated"
        saturated = " (saturated)" if self.backlog_grew else ""
        rate = f"{self.rate:,.0f}/s"
        if self.sent_per_second < 0.97 * self.rate:
            rate += f" (sent {self.sent_per_second:,.0f}/s)"
        return (
            f"| {rate} | {fmt_ms(self.enqueue_p50)} / {fmt_ms(self.enqueue_p99)} | {latency} "
            f"| {self.delivered_per_second:,.0f}/s, {outcome}{saturated} |"
        )

    def table(self) -> str:
        lines = [
            "| Rate | Enqueue p50 / p99 | Enqueue → delivery p50 / p95 / p99 | Delivered |",
            "|---|---|---|---|",
            self.row(),
        ]
        if self.ceiling_per_second:
            ratio = self.delivered_per_second / self.ceiling_per_second
            lines.append("")
            lines.append(
                f"Bare ceiling (a plain HTTP client → the same sink, as many in flight): "
                f"{self.ceiling_per_second:,.0f} req/s; delivered/ceiling = {ratio:.2f}"
            )
        return "\n".join(lines)
