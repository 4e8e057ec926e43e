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
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

MAX_CRON_LENGTH = 255
MAX_ZONE_LENGTH = 64
# No schedule fires after this: it is where Workly's times end (RFC 3339 years 1970-2999).
LAST_INSTANT = datetime(3000, 1, 1, tzinfo=UTC)
# How far ahead a next fire time is looked for: a cron that matches no existing time within
# this many years (Feb 30; 02:30 on the last Sunday of March in Europe, always skipped) has
# none, and a schedule needs one (the service refuses it).
HORIZON_YEARS = 100
# At most this many wall-clock times per walk: what the horizon allows for a cron matching
# every minute of one skipped hour a year, with room.
_MAX_CANDIDATES = 20_000
# A clock change moves local time by at most a few hours (latest_fire's backward walk).
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
        raise ValueError(f"cron {normalized!r}: {_explain(str(exc))}") from None
    return normalized


# What each field takes, for the message when cronsim refuses one ("Bad day-of-month").
_FIELD_RULES = {
    "minute": "0-59",
    "hour": "0-23",
    "day-of-month": "1-31 or L, on a day the months given have (no 30 February)",
    "month": "1-12 or JAN-DEC",
    "day-of-week": "0-7 (0 and 7: Sunday) or SUN-SAT, 5L, 1#2",
}


def _explain(refusal: str) -> str:
    for field, rule in _FIELD_RULES.items():
        if refusal.lower() == f"bad {field}":
            return f"bad {field} field: it takes {rule}, with lists (1,5), ranges (1-5) and steps (*/5)"
    return refusal.lower()


# Names the tz database has that are not places: "localtime" and "posixrules" follow the
# host's settings (so the same schedule would fire at other instants on another host),
# "Factory" is a placeholder.
_NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


def check_timezone(name: str) -> str:
    """An IANA time zone name (Europe/Amsterdam, UTC); ValueError for any other."""
    if name in _NOT_ZONES or name not in _known_zones():
        raise ValueError(f"unknown time zone {name!r}: give an IANA name such as UTC or Europe/Amsterdam")
    load_zone(name)  # listed but not loadable (a broken tz database): refused too
    return name


@cache
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones())


def load_zone(name: str) -> ZoneInfo:
    """The zone called ``name``; ValueError when this host's tz database (or the tzdata
    package) does not have it: a schedule stored where it did."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"time zone {name!r} is not in this host's tz database") from None


def fire_times(cron: str, timezone: str, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire times strictly after ``after``: fewer when the cron has no more
    within HORIZON_YEARS (or before the year 3000)."""
    tz = load_zone(timezone)
    start = _local(after, tz)
    last_year = min(start.year + HORIZON_YEARS, LAST_INSTANT.year - 1)
    found: list[datetime] = []
    for local in _walk(CronSim(cron, start)):
        if local.year > last_year:
            break
        instant = _instant(local, tz)
        if instant is not None and after < instant < LAST_INSTANT:
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

    Walks wall-clock times backwards from ``now``. Taking each time's first occurrence makes
    wall-clock order the order of instants, with one exception: while the clock repeats an
    hour, ``now``'s wall-clock time is behind fire times that have passed (at 01:10 EST,
    01:59 EDT has), so then the walk starts a few hours later and skips what is to come."""
    tz = load_zone(timezone)
    local_now = now.astimezone(tz)
    start = local_now.replace(tzinfo=None, second=0, microsecond=0) + _MINUTE  # cronsim: strictly before
    if local_now.fold:  # the second pass of a repeated hour
        start += _CLOCK_CHANGE_SPAN
    stop_before = _local(since, tz) - _CLOCK_CHANGE_SPAN
    for local in _walk(CronSim(cron, start, reverse=True)):
        if local < stop_before:
            break
        instant = _instant(local, tz)
        if instant is not None and instant <= now:
            return instant if instant >= since else None
    return None


def _walk(walk: CronSim) -> Iterator[datetime]:
    """cronsim's wall-clock times, at most _MAX_CANDIDATES of them, ending where datetime
    does (cronsim overflows at the year 1 or 9999)."""
    for _ in range(_MAX_CANDIDATES):
        try:
            local = next(walk, None)
        except OverflowError:
            return
        if local is None:
            return
        yield local


def _instant(local: datetime, tz: ZoneInfo) -> datetime | None:
    """The first instant a naive wall-clock time occurs in ``tz``; None if it never does."""
    instant = local.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if instant.astimezone(tz).replace(tzinfo=None) != local:
        return None  # in the gap of a clock change going forward
    return instant


def _local(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)
