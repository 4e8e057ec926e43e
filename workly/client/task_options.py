"""The options of the task a command makes, beyond its request: `workly enqueue` has them,
and `workly schedule-create` has the same (the task each firing makes), with the same names,
help and parsing."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from workly.client.inputs import parse_delay

Key = Annotated[str | None, typer.Option(help="ordering key")]
Tenant = Annotated[str | None, typer.Option(help="tenant, for fair sharing")]
Priority = Annotated[int | None, typer.Option(help="higher first")]
MaxAttempts = Annotated[int | None, typer.Option(help="attempts before the task fails")]
StopOn = Annotated[
    list[str] | None, typer.Option(help="a status (404) or class (4xx) that fails it at once; repeatable")
]
Deadline = Annotated[
    str | None, typer.Option(help="no attempt starts later than this after the task is made: 5m, 1h")
]
CallbackUrl = Annotated[
    str | None, typer.Option(help="called once after the task succeeded (an event's: after each delivery)")
]
FailureCallbackUrl = Annotated[
    str | None, typer.Option(help="called once after the task failed for good (an event's: each delivery)")
]


def task_fields(
    key: str | None,
    tenant: str | None,
    priority: int | None,
    max_attempts: int | None,
    stop_on: list[str] | None,
    deadline: str | None,
    callback_url: str | None,
    failure_callback_url: str | None,
) -> dict[str, Any]:
    """The options given, as the fields of an enqueue body (each named as its option is, with
    '_' for '-'); InputError for a --deadline that is not a duration."""
    fields = {
        "key": key, "tenant": tenant, "priority": priority, "max_attempts": max_attempts, "stop_on": stop_on,
        "deadline": None if deadline is None else parse_delay(deadline),
        "callback_url": callback_url, "failure_callback_url": failure_callback_url,
    }  # fmt: skip
    return {name: value for name, value in fields.items() if value is not None}
