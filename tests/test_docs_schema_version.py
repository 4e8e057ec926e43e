"""The docs' examples of `workly migrate` and `workly doctor` name the latest schema version:
each migration makes them stale otherwise (they said 15, then 11, while the code was at 17)."""

from __future__ import annotations

import re
from pathlib import Path

from workly.storage.migrator import load_migrations

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
APPLIED = re.compile(r"applied \[(?P<versions>[\d, …]+)\]; schema version (?P<version>\d+)")
THIS_WORKLYS = re.compile(r"this Workly's is (?P<version>\d+)")


def test_every_example_names_the_latest_schema_version() -> None:
    latest = len(load_migrations("postgres"))
    assert latest == len(load_migrations("sqlite"))
    seen = []
    for page in PAGES:
        text = page.read_text("utf-8")
        for match in [*APPLIED.finditer(text), *THIS_WORKLYS.finditer(text)]:
            seen.append(page.name)
            assert int(match.group("version")) == latest, f"{page.name}: {match.group(0)!r}"
            versions = match.groupdict().get("versions")
            if versions and "…" not in versions:
                assert versions == ", ".join(str(v) for v in range(1, latest + 1)), page.name
    assert {"configuration.md", "operations.md", "sql-enqueue.md"} <= set(seen)
