"""Five-field cron expressions in an IANA time zone: when a schedule fires.

Parsing and field matching are cronsim's (the library Healthchecks.io runs its cron
checks on; docs/schedules.md says why this one). The walk over local wall-clock time and
its daylight-saving rule are Workly's, because cronsim (like Debian's cron) runs a job
whose time falls in a skipped hour right after the jump, and croniter fires a repeated
hour twice; Workly's contract is simpler to state:

- a local time that does not exist (the hour skipped when clocks go forward) is skipped;
- a local time that occurs twice (the hour repeated when clocks go back) fires once, at
  its first occurrence.

cronsim walks naive wall-clock times; each is turned into an instant here. All instants
are ``datetime`` in UTC.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

MAX_CRON_LENGTH = 255
MAX_ZONE_LENGTH = 64
# No schedule fires after this: it is where Workly's times end (RFC 3339 years 1970-2999).
LAST_INSTANT = datetime(3000, 1, 1, tzinfo=UTC)
# How far a walk goes looking for a time that exists before giving up: a cron that matches
# only times that never happen (or none before the year 3000) has no next run.
_MAX_CANDIDATES = 100_000
# A clock change moves local time by at most a few hours; beyond that the order of
# wall-clock times is the order of instants again (latest_fire's backward walk relies on it).
_CLOCK_CHANGE_SPAN = timedelta(hours=3)
_MINUTE = timedelta(minutes=1)


def check_cron(expression: str) -> str:
    """The expression with its fields separated by single spaces; ValueError saying what is
    wrong with it otherwise. Five fields (minute hour day-of-month month day-of-week), with
    lists, ranges, steps, month and weekday names, ``L`` and ``#`` as cronsim reads them."""
    if len(expression) > MAX_CRON_LENGTH:
        raise ValueError(f"cron must be at most {MAX_CRON_LENGTH} characters")
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(
            f"cron needs five fields (minute hour day-of-month month day-of-week), got {len(fields)}: "
            f"{expression!r}"
        )
    normalized = " ".join(fields)
    try:
        CronSim(normalized, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise ValueError(f"cron {normalized!r}: {str(exc).lower()}") from None
    return normalized


def check_timezone(name: str) -> str:
    """An IANA time zone name (Europe/Amsterdam, UTC); ValueError for any other."""
    if not name or len(name) > MAX_ZONE_LENGTH or name != name.strip() or "\x00" in name:
        raise ValueError(f"unknown time zone {name!r}: give an IANA name such as UTC or Europe/Amsterdam")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            f"unknown time zone {name!r}: give an IANA name such as UTC or Europe/Amsterdam"
        ) from None
    return name


def fire_times(cron: str, timezone: str, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire times strictly after ``after`` (fewer when the cron has no
    more before the year 3000)."""
    zone = ZoneInfo(timezone)
    found: list[datetime] = []
    for instant in _instants(CronSim(cron, _local(after, zone)), zone):
        if instant > after:
            found.append(instant)
            if len(found) == count:
                break
    return found


def next_fire(cron: str, timezone: str, after: datetime) -> datetime | None:
    """The first fire time strictly after ``after``; None when there is none."""
    found = fire_times(cron, timezone, after, 1)
    return found[0] if found else None


def latest_fire(cron: str, timezone: str, since: datetime, now: datetime) -> datetime | None:
    """The last fire time in [``since``, ``now``]; None when there is none.

    Walks wall-clock times backwards. Around a clock change going back, a later wall-clock
    time can be an earlier instant (at 01:10 EST, 01:59 EDT has passed), so the walk starts
    a few hours of wall-clock time after ``now``, goes on as far past the first fire time
    it finds, and keeps the latest instant."""
    zone = ZoneInfo(timezone)
    # cronsim walks strictly before its start.
    start = _local(now, zone).replace(second=0, microsecond=0) + _MINUTE + _CLOCK_CHANGE_SPAN
    stop_before = _local(since, zone) - _CLOCK_CHANGE_SPAN
    best: datetime | None = None
    best_local: datetime | None = None
    walk = CronSim(cron, start, reverse=True)
    for _ in range(_MAX_CANDIDATES):
        local = next(walk, None)
        if local is None or local < stop_before:
            break
        if best_local is not None and local < best_local - _CLOCK_CHANGE_SPAN:
            break
        instant = _instant(local, zone)
        if instant is not None and since <= instant <= now and (best is None or instant > best):
            best, best_local = instant, local
    return best


def _instants(walk: CronSim, zone: ZoneInfo) -> Iterator[datetime]:
    """The instants of the wall-clock times ``walk`` yields, the ones that do not exist left
    out, each repeated one at its first occurrence."""
    for _ in range(_MAX_CANDIDATES):
        local = next(walk, None)
        if local is None:
            return
        instant = _instant(local, zone)
        if instant is None:
            continue
        if instant >= LAST_INSTANT:
            return
        yield instant


def _instant(local: datetime, zone: ZoneInfo) -> datetime | None:
    """The first instant a naive wall-clock time occurs in ``zone``; None if it never does."""
    instant = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != local:
        return None  # in the gap of a clock change going forward
    return instant


def _local(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)
