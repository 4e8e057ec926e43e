"""Next-fire computation as pure functions: DST changes in Europe/Amsterdam and
America/New_York (the skipped hour is skipped, the repeated hour fires once, at its first
occurrence), month ends, weekdays, steps, and what is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workly.cron import check_cron, check_timezone, fire_times, latest_fire, next_fire

AMS = "Europe/Amsterdam"
NYC = "America/New_York"


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def local(zone: str, *parts: int, fold: int = 0) -> datetime:
    """A wall-clock time in ``zone`` as an instant in UTC."""
    return datetime(*parts, tzinfo=ZoneInfo(zone), fold=fold).astimezone(UTC)  # type: ignore[misc]


def walls(zone: str, instants: list[datetime]) -> list[str]:
    """Instants as the wall clock of ``zone`` shows them, with the offset."""
    return [i.astimezone(ZoneInfo(zone)).strftime("%m-%d %H:%M%z") for i in instants]


# --- the hour skipped when clocks go forward ----------------------------------------------
def test_a_daily_time_in_the_skipped_hour_does_not_fire_that_day_in_amsterdam() -> None:
    # 2027-03-28: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that day.
    runs = fire_times("30 2 * * *", AMS, local(AMS, 2027, 3, 26, 12), 3)
    assert walls(AMS, runs) == ["03-27 02:30+0100", "03-29 02:30+0200", "03-30 02:30+0200"]


def test_a_daily_time_in_the_skipped_hour_does_not_fire_that_day_in_new_york() -> None:
    # 2027-03-14: 02:00 EST becomes 03:00 EDT.
    runs = fire_times("15 2 * * *", NYC, local(NYC, 2027, 3, 13, 12), 2)
    assert walls(NYC, runs) == ["03-15 02:15-0400", "03-16 02:15-0400"]


def test_a_step_schedule_resumes_at_the_first_time_after_the_skipped_hour() -> None:
    runs = fire_times("*/20 * * * *", AMS, local(AMS, 2027, 3, 28, 1, 30), 4)
    assert walls(AMS, runs) == [
        "03-28 01:40+0100",
        "03-28 03:00+0200",
        "03-28 03:20+0200",
        "03-28 03:40+0200",
    ]
    # Back to back instants: 01:40 CET and 03:00 CEST are 20 minutes apart.
    assert runs[1] - runs[0] == timedelta(minutes=20)


def test_an_hourly_schedule_loses_the_skipped_hour_only() -> None:
    runs = fire_times("0 * * * *", NYC, local(NYC, 2027, 3, 14, 0, 30), 3)
    assert walls(NYC, runs) == ["03-14 01:00-0500", "03-14 03:00-0400", "03-14 04:00-0400"]


# --- the hour repeated when clocks go back --------------------------------------------------
def test_a_daily_time_in_the_repeated_hour_fires_once_at_its_first_occurrence_in_amsterdam() -> None:
    # 2027-10-31: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
    runs = fire_times("30 2 * * *", AMS, local(AMS, 2027, 10, 30, 12), 3)
    assert walls(AMS, runs) == ["10-31 02:30+0200", "11-01 02:30+0100", "11-02 02:30+0100"]


def test_a_daily_time_in_the_repeated_hour_fires_once_in_new_york() -> None:
    # 2027-11-07: 02:00 EDT becomes 01:00 EST; 01:30 happens twice.
    runs = fire_times("30 1 * * *", NYC, local(NYC, 2027, 11, 6, 12), 2)
    assert walls(NYC, runs) == ["11-07 01:30-0400", "11-08 01:30-0500"]


def test_asked_during_the_second_pass_the_repeated_times_do_not_fire_again() -> None:
    # At 01:10 EST (the second 01:10), 01:30 already fired (as EDT): the next is 02:00 EST.
    after = local(NYC, 2027, 11, 7, 1, 10, fold=1)
    assert walls(NYC, fire_times("*/30 * * * *", NYC, after, 2)) == ["11-07 02:00-0500", "11-07 02:30-0500"]


def test_a_step_schedule_over_the_repeated_hour_fires_each_wall_time_once() -> None:
    runs = fire_times("*/30 * * * *", NYC, local(NYC, 2027, 11, 7, 0, 15), 4)
    assert walls(NYC, runs) == [
        "11-07 00:30-0400",
        "11-07 01:00-0400",
        "11-07 01:30-0400",
        "11-07 02:00-0500",
    ]
    assert runs == sorted(runs) and len(set(runs)) == len(runs)


# --- calendars --------------------------------------------------------------------------
def test_month_ends_and_the_last_day() -> None:
    runs = fire_times("0 12 31 * *", "UTC", utc(2027, 1, 31, 13), 3)
    assert runs == [utc(2027, 3, 31, 12), utc(2027, 5, 31, 12), utc(2027, 7, 31, 12)]
    assert fire_times("0 0 L * *", "UTC", utc(2028, 1, 31, 1), 2) == [utc(2028, 2, 29), utc(2028, 3, 31)]
    assert next_fire("0 0 29 2 *", "UTC", utc(2027, 3, 1)) == utc(2028, 2, 29)


def test_weekdays_names_and_sunday_as_0_or_7() -> None:
    # 2027-01-01 is a Friday.
    weekdays = fire_times("0 9 * * MON-FRI", "UTC", utc(2027, 1, 1, 10), 3)
    assert weekdays == [utc(2027, 1, 4, 9), utc(2027, 1, 5, 9), utc(2027, 1, 6, 9)]
    assert next_fire("0 0 * * 0", "UTC", utc(2027, 1, 1)) == next_fire("0 0 * * 7", "UTC", utc(2027, 1, 1))
    # Day of month and day of week both restricted: either matches (as cron does).
    assert fire_times("0 0 13 * 5", "UTC", utc(2027, 1, 1, 1), 2) == [utc(2027, 1, 8), utc(2027, 1, 13)]


def test_steps_and_lists() -> None:
    assert fire_times("*/15 * * * *", "UTC", utc(2027, 1, 1, 0, 7), 3) == [
        utc(2027, 1, 1, 0, 15), utc(2027, 1, 1, 0, 30), utc(2027, 1, 1, 0, 45),
    ]  # fmt: skip
    assert fire_times("5,35 */6 * * *", "UTC", utc(2027, 1, 1, 0, 6), 3) == [
        utc(2027, 1, 1, 0, 35), utc(2027, 1, 1, 6, 5), utc(2027, 1, 1, 6, 35),
    ]  # fmt: skip


def test_fire_times_are_strictly_after_the_given_time() -> None:
    assert next_fire("* * * * *", "UTC", utc(2027, 1, 1, 0, 1)) == utc(2027, 1, 1, 0, 2)
    assert next_fire("* * * * *", "UTC", utc(2027, 1, 1, 0, 1, 0, 1)) == utc(2027, 1, 1, 0, 2)  # type: ignore[arg-type]


def test_no_fire_time_after_the_year_2999() -> None:
    assert next_fire("0 0 1 1 *", "UTC", utc(2999, 6, 1)) is None


# --- the latest missed time (catch-up) -------------------------------------------------------
def test_latest_fire_finds_the_last_time_in_a_window() -> None:
    assert latest_fire("*/5 * * * *", "UTC", utc(2027, 1, 1, 0, 5), utc(2027, 1, 1, 3, 7)) == utc(
        2027, 1, 1, 3, 5
    )
    assert latest_fire("0 9 * * *", "UTC", utc(2027, 1, 1, 9), utc(2027, 1, 30, 8)) == utc(2027, 1, 29, 9)
    assert latest_fire("0 9 * * *", "UTC", utc(2027, 1, 1, 9, 1), utc(2027, 1, 1, 10)) is None


def test_latest_fire_around_the_repeated_hour_is_the_latest_instant() -> None:
    # At 01:10 EST the last fire time is 01:59 EDT, not the earlier 01:10 EDT.
    now = local(NYC, 2027, 11, 7, 1, 10, fold=1)
    assert latest_fire("* * * * *", NYC, local(NYC, 2027, 11, 7, 0, 0), now) == local(NYC, 2027, 11, 7, 1, 59)


def test_latest_fire_skips_the_skipped_hour() -> None:
    now = local(AMS, 2027, 3, 28, 3, 10)
    assert latest_fire("30 2 * * *", AMS, utc(2027, 3, 1), now) == local(AMS, 2027, 3, 27, 2, 30)


# --- input -----------------------------------------------------------------------------
def test_check_cron_normalizes_spaces() -> None:
    assert check_cron("  */5   *  * * * ") == "*/5 * * * *"


@pytest.mark.parametrize(
    "expression",
    ["", "* * * *", "* * * * * *", "61 * * * *", "* 24 * * *", "0 0 30 2 *", "*/0 * * * *", "@daily",
     "not a cron", "1-0 * * * *", "0 0 ? * *", "x" * 300],
)  # fmt: skip
def test_bad_crons_are_refused_with_a_message(expression: str) -> None:
    with pytest.raises(ValueError, match="cron"):
        check_cron(expression)


@pytest.mark.parametrize(
    "name", ["", "Mars/Olympus", "UTC ", "../../etc/passwd", "Europe/", "a\x00b", "x" * 80]
)
def test_unknown_time_zones_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="time zone"):
        check_timezone(name)


def test_known_zones_are_taken() -> None:
    assert [check_timezone(z) for z in ("UTC", AMS, NYC)] == ["UTC", AMS, NYC]


@given(st.text(max_size=40))
def test_any_text_is_a_cron_or_a_value_error(text: str) -> None:
    try:
        normalized = check_cron(text)
    except ValueError:
        return
    assert len(normalized.split(" ")) == 5
    after = utc(2027, 1, 1)
    run = next_fire(normalized, "UTC", after)  # an accepted cron never fails to compute
    assert run is None or run > after


@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2990, 1, 1)),
    st.sampled_from([AMS, NYC, "UTC"]),
)
def test_fire_times_increase_and_fall_on_matching_wall_times(start: datetime, zone: str) -> None:
    after = start.replace(tzinfo=UTC)
    runs = fire_times("*/7 1-3 * * *", zone, after, 6)
    assert runs == sorted(runs) and len(set(runs)) == len(runs) and all(r > after for r in runs)
    for run in runs:
        wall = run.astimezone(ZoneInfo(zone))
        assert wall.minute % 7 == 0 and 1 <= wall.hour <= 3


# Around the 2027 clock changes of both zones.
_CHANGES = [
    local(AMS, 2027, 3, 28, 1),
    local(AMS, 2027, 10, 31, 1),
    local(NYC, 2027, 3, 14, 0),
    local(NYC, 2027, 11, 7, 0),
]


@given(
    st.sampled_from(_CHANGES),
    st.integers(min_value=-180, max_value=300),
    st.integers(min_value=0, max_value=400),
    st.sampled_from(["* * * * *", "*/20 * * * *", "30 1,2 * * *", "0 * * * *", "45 2 * * *"]),
    st.sampled_from([AMS, NYC]),
)
def test_latest_fire_is_the_last_of_the_fire_times_in_the_window(
    change: datetime, offset: int, width: int, cron: str, zone: str
) -> None:
    since = change + timedelta(minutes=offset)
    now = since + timedelta(minutes=width)
    inside = [run for run in fire_times(cron, zone, since - timedelta(microseconds=1), 500) if run <= now]
    assert latest_fire(cron, zone, since, now) == (inside[-1] if inside else None)
