"""The filter options of `workly retry` / `workly cancel` into the API's filter (pure: the
current time is passed in, nothing connects)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import typer

from workly.client.inputs import InputError, parse_when
from workly.client.operations import Filters, one_task, task_filter

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("2030-01-01T00:00:00Z", "2030-01-01T00:00:00Z"),
        ("2030-01-01T01:30:00+01:30", "2030-01-01T00:00:00Z"),  # any offset, shown as UTC
        ("2030-01-01t00:00:00.25z", "2030-01-01T00:00:00.250000Z"),
        ("2030-01-01 00:00:00-02:00", "2030-01-01T02:00:00Z"),
        ("30s", "2026-05-01T11:59:30Z"),  # a duration counts back from now
        ("10m", "2026-05-01T11:50:00Z"),
        ("2h", "2026-05-01T10:00:00Z"),
        ("1d", "2026-04-30T12:00:00Z"),
        (" 90s ", "2026-05-01T11:58:30Z"),
        ("0s", "2026-05-01T12:00:00Z"),
    ],
)
def test_since_takes_rfc3339_or_a_duration_ago(text: str, when: str) -> None:
    assert parse_when(text, NOW) == when


def test_a_duration_counts_back_from_now_in_any_zone() -> None:
    paris_noon = NOW.astimezone(timezone(timedelta(hours=2)))
    assert parse_when("1h", paris_noon) == "2026-05-01T11:00:00Z"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("yesterday", "neither a time"),
        ("", "neither a time"),
        ("-5m", "neither a time"),  # back from now only: a time ahead is given as RFC 3339
        ("2030-01-01", "neither a time"),  # a date alone
        ("2030-01-01T00:00:00", "has no UTC offset"),
        ("2030-13-01T00:00:00Z", "is not a valid time"),
        ("1969-12-31T23:59:59Z", "outside the years 1970 to 2999"),
        ("3000-01-01T00:00:00Z", "outside the years 1970 to 2999"),
        ("0001-01-01T00:00:00+01:00", "outside the years 1970 to 2999"),
        ("100000d", "outside the years 1970 to 2999"),
        ("1" * 400 + "d", "outside the years 1970 to 2999"),
        ("1700000000", "has no unit"),  # a Unix timestamp must not mean 1973
        ("2024", "has no unit"),  # nor a year 34 minutes ago
        ("90", "has no unit"),
    ],
)
def test_bad_times_are_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says):
        parse_when(text, NOW)


def test_the_filter_names_the_api_fields_and_leaves_out_what_is_not_given() -> None:
    given = Filters(queue="orders", endpoint="ep_1", status="failed", since="1h", last_status_code=503)
    assert task_filter(given, NOW, "retry") == {
        "queue": "orders", "endpoint_id": "ep_1", "status": "failed",
        "created_after": "2026-05-01T11:00:00Z", "last_status_code": 503,
    }  # fmt: skip
    both = Filters(
        since="2d", until="2026-05-01T00:00:00+02:00", event_type="invoice.paid", tenant="t", key="k"
    )
    assert task_filter(both, NOW, "cancel") == {
        "event_type": "invoice.paid", "tenant": "t", "key": "k",
        "created_after": "2026-04-29T12:00:00Z", "created_before": "2026-04-30T22:00:00Z",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "says"),
    [
        (Filters(since="yesterday"), "--since: 'yesterday' is neither a time"),
        (Filters(until="2030-01-01T00:00:00"), "--until: '2030-01-01T00:00:00' has no UTC offset"),
        (Filters(since="1h", until="2h"), r"--since \(2026-05-01T11:00:00Z\) is not before --until"),
        (Filters(status="done"), "--status 'done' is not one of ready, running, succeeded, failed, canceled"),
        (Filters(last_status_code=99), "--last-status-code 99 is not an HTTP status"),
        (Filters(last_status_code=600), "--last-status-code 600 is not an HTTP status"),
        (Filters(queue="bad/q"), "--queue 'bad/q' is not a queue name"),
        (Filters(tenant=""), "--tenant is empty"),
        (Filters(status="ready"), "--status ready: retry changes only failed and canceled tasks"),
        (Filters(status="succeeded"), "--status succeeded: retry changes only failed and canceled"),
    ],
)
def test_bad_options_are_refused_naming_the_option(filters: Filters, says: str) -> None:
    with pytest.raises(InputError, match=says):
        task_filter(filters, NOW, "retry")


@pytest.mark.parametrize("status", ["failed", "canceled", "running", "succeeded"])
def test_a_cancel_of_tasks_it_cannot_change_is_refused(status: str) -> None:
    with pytest.raises(InputError, match="cancel changes only ready tasks"):
        task_filter(Filters(status=status), NOW, "cancel")
    assert task_filter(Filters(status="ready"), NOW, "cancel") == {"status": "ready"}


def test_one_task_or_filter_options_never_both_nor_neither() -> None:
    assert one_task("retry", "task_1", Filters()) == "task_1"
    assert one_task("retry", None, Filters(queue="q")) is None
    assert one_task("cancel", None, Filters(last_status_code=500)) is None
    for task_id, filters in [(None, Filters()), ("task_1", Filters(status="failed"))]:
        with pytest.raises(typer.Exit) as exited:
            one_task("retry", task_id, filters)
        assert exited.value.exit_code == 2
