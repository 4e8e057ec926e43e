"""`workly doctor`: check the settings and the database a server would run with, and say what
to fix (workly/service/doctor.py). Exit 1 when something would stop `workly serve`."""

from __future__ import annotations

import asyncio

import typer

from workly.cli.checks import invalid_settings


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


def doctor() -> None:
    """Check WORKLY_* and the database as `workly serve` would use them, and print what to fix:
    the database (reachable, migrated, vacuumed, its clock), the signing keys, the API tokens,
    the outbound policy and its files. Changes nothing."""
    from workly.config import Settings
    from workly.service.core import open_configured_storage
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
    for finding in findings:
        typer.echo(f"{finding.level:<5} {finding.topic:<9} {finding.text}")
    failed = sum(f.level == "fail" for f in findings)
    warned = sum(f.level == "warn" for f in findings)
    typer.echo(f"\n{failed} to fix, {warned} to look at" if failed or warned else "\nall good")
    if failed:
        raise typer.Exit(code=1)
