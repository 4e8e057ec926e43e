"""A task as the API shows it: the lease of a running one."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.storage.helpers import new
from workly.models import Task
from workly.task_json import task_json

AT = datetime(2026, 12, 2, 10, 31, 5, tzinfo=UTC)


def stored(**fields: object) -> Task:
    template = new()
    return Task(
        id=template.id, queue="q", status="running", url=template.url, method="POST", headers={}, body=b"",
        run_at=AT, priority=0, key=None, tenant=None, idempotency_key=None, attempts=1, max_attempts=10,
        timeout=30.0, last_status_code=None, last_error=None, created_at=AT, updated_at=AT,
        **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_running_task_shows_who_holds_it_until_when() -> None:
    shown = task_json(stored(lease_holder="worker-3:4242", lease_expires_at=AT))
    assert shown["lease"] == {"holder": "worker-3:4242", "expires_at": "2026-12-02T10:31:05Z"}
    assert task_json(stored())["lease"] is None
