"""Summarise a py-spy raw profile of the server into where its CPU goes, per task.

    py-spy record --pid PID --gil --format raw --rate 100 --duration 10 --output prof.txt
    python -m tools.bench.profile_summary prof.txt

Each sample (a stack holding the GIL) goes to the first category whose marker appears in
it, from the most specific down; the remaining samples are the event loop, uvicorn's
protocol and asyncio's own work.
"""

from __future__ import annotations

import sys
from collections import Counter

CATEGORIES = [
    ("attempt logging", ("Logger.info", "Logger._log")),
    ("signing (HMAC)", ("Signer.headers",)),
    ("delivery HTTP client", ("HttpClient.request", "_Connection.", "Deliverer.deliver")),
    ("enqueue validation (pydantic)", ("model_validate_json", "TaskIn.")),
    ("database calls (driver, rows)", ("PostgresStorage.", "SqliteStorage.", "_WorkItem.run", "asyncpg")),
    ("enqueue request handling", ("FastEnqueue.", "enqueue_one", "task_json", "JSONResponse")),
    ("API framework (FastAPI/Starlette)", ("starlette", "fastapi")),
    ("dispatcher bookkeeping", ("Dispatcher.", "judge", "GroupCommitter", "Enqueuer")),
]


def categorise(path: str) -> Counter[str]:
    totals: Counter[str] = Counter()
    with open(path, encoding="utf-8") as lines:
        samples = [line.rstrip().rpartition(" ") for line in lines]
    for stack, _, count in samples:
        for name, markers in CATEGORIES:
            if any(marker in stack for marker in markers):
                totals[name] += int(count)
                break
        else:
            totals["event loop, uvicorn protocol, other"] += int(count)
    return totals


if __name__ == "__main__":
    totals = categorise(sys.argv[1])
    whole = sum(totals.values())
    for name, count in totals.most_common():
        print(f"{count / whole * 100:5.1f}%  {name}")
    print(f"({whole} samples holding the GIL)")
