"""A task as the API shows it: the lease of a running one; the enqueue's answer shows the body
it was given as the stored task shows its bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.storage.helpers import new
from workly.api.schemas import TaskIn
from workly.models import Task
from workly.task_json import body_fields, task_json

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


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    body=_JSON, content_type=st.sampled_from([None, "application/json", "text/plain", "application/x+json"])
)
def test_the_enqueues_answer_shows_the_body_as_the_stored_task_does(
    body: object, content_type: str | None
) -> None:
    """The enqueue's answer takes the body it was given (TaskIn.body_fields) instead of
    parsing the stored bytes again: whenever it does, the two agree, type for type."""
    headers = {} if content_type is None else {"content-type": content_type}
    try:
        task = TaskIn.model_validate_json(
            json.dumps({"url": "http://127.0.0.1:9/", "headers": headers, "body": body})
        )
    except ValidationError:
        assume(False)  # refused at the door (a lone surrogate, say): nothing is answered
        raise
    known = task.body_fields()
    stored_headers, stored_body = task.encoded
    from_bytes = body_fields(stored_headers, stored_body)
    if known is not None:
        assert json.dumps(known) == json.dumps(from_bytes)
        assert _types(known) == _types(from_bytes)


def _types(value: object) -> object:
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_types(item) for item in value]
    return type(value).__name__


def _task_in(fields: dict[str, object]) -> TaskIn:
    return TaskIn.model_validate_json(json.dumps({"url": "http://127.0.0.1:9/", **fields}))


def test_only_json_given_as_json_is_answered_without_reading_it_back() -> None:
    assert _task_in({"body": {"n": 1}}).body_fields() == ({"n": 1}, None)
    assert _task_in({"body": [1.5, None]}).body_fields() == ([1.5, None], None)
    assert _task_in({"body": "text"}).body_fields() is None
    assert _task_in({"body": {"n": 1}, "headers": {"content-type": "text/plain"}}).body_fields() is None
    assert _task_in({"body_base64": "AAE="}).body_fields() is None
    assert _task_in({}).body_fields() is None
