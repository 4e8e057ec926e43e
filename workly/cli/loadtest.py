"""`workly loadtest`: the load test from the command line (workly/loadtest)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Annotated

import typer

from workly.cli.checks import fail
from workly.client.api import DEFAULT_SERVER
from workly.client.common import Server, Token

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m)?")


def register(app: typer.Typer) -> None:
    app.command("loadtest")(loadtest)


def _seconds(text: str, option: str) -> float:
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        fail(f"{option} {text!r} is not a duration: e.g. 20s, 500ms, 1m")
    value, unit = float(found.group(1)), found.group(2) or "s"
    return value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def loadtest(
    rate: Annotated[float, typer.Option(min=0.001, help="tasks per second")] = 1000,
    duration: Annotated[str, typer.Option(help="how long to measure, after the warm-up: 20s, 1m")] = "20s",
    warmup: Annotated[str, typer.Option(help="warm-up at the same rate, not measured")] = "5s",
    concurrency: Annotated[int, typer.Option(min=1, help="enqueue requests in flight")] = 64,
    queue: Annotated[str, typer.Option(help="queue it makes afresh, uses and deletes")] = "loadtest",
    keep: Annotated[bool, typer.Option("--keep", help="leave the queue and its tasks in the server")] = False,
    drain: Annotated[str, typer.Option(help="how long to wait for the last deliveries")] = "60s",
    ceiling: Annotated[
        str, typer.Option(help="first measure a bare client to the sink for this long")
    ] = "0s",
    json_file: Annotated[
        Path | None, typer.Option("--json", help="also write the results here, as JSON")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress line")] = False,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
) -> None:
    """Enqueue at a fixed rate through the API to a no-op receiver this command runs (on this
    machine: the server must be allowed to deliver to 127.0.0.1, as `workly dev` is), and
    print enqueue and enqueue→delivery latency; exit 1 if a task was lost or refused."""
    from workly.loadtest import LoadTest, LoadTestError, LoadTestInterrupted, run_load_test
    from workly.models import is_queue_name

    if not is_queue_name(queue):
        fail(f"--queue {queue!r} is not a queue name: letters, digits, '.', '_' and '-', up to 128")
    if rate * _seconds(duration, "--duration") < 1:
        fail("--rate times --duration is under one task: nothing would be measured")
    if json_file is not None and not json_file.parent.is_dir():
        fail(f"--json {json_file}: no directory {json_file.parent} to write it in")
    test = LoadTest(
        server=server.rstrip("/"), token=token, rate=rate, duration=_seconds(duration, "--duration"),
        warmup=_seconds(warmup, "--warmup"), concurrency=concurrency, queue=queue,
        drain=_seconds(drain, "--drain"), ceiling=_seconds(ceiling, "--ceiling"), quiet=quiet, keep=keep,
    )  # fmt: skip
    try:
        report, summary = asyncio.run(run_load_test(test))
    except LoadTestInterrupted as exc:
        fail(str(exc), code=130)
    except LoadTestError as exc:
        fail(str(exc), code=1)
    except KeyboardInterrupt:  # before it made its queue
        fail("interrupted", code=130)
    typer.echo(report.table())
    typer.echo(f"\n{summary}")
    if json_file is not None:
        json_file.write_text(json.dumps(report.as_json(), indent=2) + "\n")
    if report.lost or report.enqueue_errors:
        raise typer.Exit(code=1)
