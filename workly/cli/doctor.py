"""`workly doctor`: check the settings and the database a server would run with, and say what
to fix (workly/service/doctor.py). Exit 1 when something would stop `workly serve`. And
`workly recount`, the fix for the task counts it may find wrong."""

from __future__ import annotations

import asyncio
import os

import typer

from workly.cli.checks import invalid_settings


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
    app.command("recount")(recount)


def doctor() -> None:
    """Check WORKLY_* and the database as `workly serve` would use them, and print what to fix:
    the database (reachable, migrated, vacuumed, its clock), the signing keys, the API tokens,
    the outbound policy and its files. Changes nothing."""
    from workly.config import Settings
    from workly.service.assembly import open_configured_storage
    from workly.service.doctor import Finding, check_database, check_settings

    problems = invalid_settings()
    if problems:
        findings = [Finding("fail", "settings", problem) for problem in problems]
    else:
        settings = Settings()
        findings = [
            Finding("ok", "settings", "WORKLY_* read"),
            *asyncio.run(check_database(settings, open_configured_storage)),
            *check_settings(settings),
        ]
    if not os.environ.get("WORKLY_DATABASE_URL"):
        typer.echo("checking the settings as `workly serve` would use them (`workly dev` makes its own)\n")
    for finding in findings:
        typer.echo(f"{finding.level:<5} {finding.topic:<9} {finding.text}")
    failed = sum(f.level == "fail" for f in findings)
    warned = sum(f.level == "warn" for f in findings)
    typer.echo(f"\n{failed} to fix, {warned} to look at" if failed or warned else "\nall good")
    if failed:
        raise typer.Exit(code=1)


def recount() -> None:
    """Count the tasks again into the kept counts of GET /v1/queues and the dashboard (what
    `workly doctor` asks for when they disagree with the tasks). Writers wait meanwhile."""
    from workly.cli.checks import NO_DATABASE, fail, load_settings
    from workly.database_url import redacted
    from workly.errors import ConfigError, StorageError
    from workly.service.assembly import open_configured_storage
    from workly.service.doctor import recount as recount_tasks

    settings = load_settings()
    if not settings.database_url:
        fail("WORKLY_DATABASE_URL is not set")
    try:
        miscounted = asyncio.run(recount_tasks(settings, open_configured_storage))
    except ConfigError as exc:
        fail(str(exc))
    except StorageError as exc:
        fail(f"cannot recount {redacted(settings.database_url)}: {exc}", NO_DATABASE)
    wrong = f"they were wrong for {', '.join(miscounted)}" if miscounted else "they were right"
    typer.echo(f"counted the tasks again; {wrong}")
