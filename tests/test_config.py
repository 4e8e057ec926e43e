"""Settings: the rules that span more than one setting."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.support.servers import TEST_SECRET
from workly.config import Settings
from workly.database_url import redacted


def test_the_defaults_keep_the_margin_at_three_database_timeouts() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert (settings.lease_margin, settings.db_timeout) == (30.0, 10.0)


@pytest.mark.parametrize(("margin", "db_timeout"), [(3.0, 1.0), (30.0, 0.5), (0.3, 0.1)])
def test_a_margin_of_at_least_three_database_timeouts_is_accepted(margin: float, db_timeout: float) -> None:
    assert Settings(lease_margin=margin, db_timeout=db_timeout).lease_margin == margin


@pytest.mark.parametrize(("margin", "db_timeout"), [(29.9, 10.0), (1.0, 1.0), (30.0, 60.0)])
def test_a_margin_shorter_than_three_database_timeouts_is_refused(margin: float, db_timeout: float) -> None:
    with pytest.raises(
        ValidationError, match=r"WORKLY_LEASE_MARGIN .* must be at least 3 times WORKLY_DB_TIMEOUT"
    ):
        Settings(lease_margin=margin, db_timeout=db_timeout)


@pytest.mark.parametrize(("given", "level"), [("INFO", "info"), ("Debug", "debug"), ("warning", "warning")])
def test_log_levels_are_read_in_any_case(given: str, level: str) -> None:
    assert Settings(log_level=given).log_level == level


@pytest.mark.parametrize("given", ["verbose", "trace", ""])
def test_unknown_log_levels_are_refused(given: str) -> None:
    with pytest.raises(ValidationError, match="log_level"):
        Settings(log_level=given)


@pytest.mark.parametrize("size", ["0", "-1", "many", ""])
def test_a_bad_pool_size_in_the_database_url_is_refused(size: str) -> None:
    with pytest.raises(ValidationError, match="pool_max_conns must be a positive integer"):
        Settings(database_url=f"postgresql://postgres@127.0.0.1/workly?pool_max_conns={size}")


@pytest.mark.parametrize(
    "query",
    [
        "search_path=legacy",
        "options=-c%20search_path%3Dlegacy",
        "sslmode=disable&search_path=a",
        "SEARCH_PATH=a",
    ],
)
def test_a_search_path_in_the_database_url_is_refused_for_the_schema_setting(query: str) -> None:
    with pytest.raises(ValidationError, match="WORKLY_DATABASE_SCHEMA"):
        Settings(database_url=f"postgresql://u@db/app?{query}")


def test_other_options_in_the_database_url_are_kept() -> None:
    assert Settings(database_url="postgresql://u@db/app?options=-c%20jit%3Doff").database_url


@pytest.mark.parametrize(
    ("interval", "ok"), [(0, True), (0.001, True), (0.005, True), (0.0001, False), (-1, False)]
)
def test_the_sql_poll_interval_is_zero_or_at_least_a_millisecond(interval: float, ok: bool) -> None:
    if ok:
        assert Settings(sql_poll_interval=interval).sql_poll_interval == interval
    else:
        with pytest.raises(ValidationError):
            Settings(sql_poll_interval=interval)


def test_the_settings_repr_shows_no_secret() -> None:
    shown = repr(
        Settings(
            database_url="postgresql://u:db-password@h/db",
            signing_secret=TEST_SECRET,
            api_tokens="api-token-123",
            outbound_proxy="http://u:proxy-password@proxy.internal:3128",
        )
    )
    for secret in ("db-password", TEST_SECRET, "api-token-123", "proxy-password"):
        assert secret not in shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:hunter2@db/workly", "postgresql://app:***@db/workly"),
        ("postgresql://app@db/workly?password=hunter2&sslmode=require",
         "postgresql://app@db/workly?password=***&sslmode=require"),
        ("postgresql://db/workly?sslpassword=k3y&PASSWORD=x&flag", "postgresql://db/workly?sslpassword=***&PASSWORD=***&flag"),
        ("postgresql://app@db/workly", "postgresql://app@db/workly"),
        ("sqlite:///./workly.db", "sqlite:///./workly.db"),
    ],
)  # fmt: skip
def test_a_url_in_a_message_shows_no_password(url: str, shown: str) -> None:
    assert redacted(url) == shown
