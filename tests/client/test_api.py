"""The client refuses what it cannot send before sending anything (pure: nothing connects)."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest

from workly.client.api import ApiClient, ClientError, _segment
from workly.client.inputs import InputError


@pytest.mark.parametrize(
    ("server", "token"),
    [("http://[::1", None), ("ftp://127.0.0.1", None), ("127.0.0.1:7337", None), ("http://127.0.0.1", "é"),
     ("http://127.0.0.1", "two words"), ("http://127.0.0.1", "line\nbreak")],
)  # fmt: skip
def test_unusable_servers_and_tokens_are_refused(server: str, token: str | None) -> None:
    with pytest.raises(InputError):
        ApiClient(server, token)


@pytest.mark.parametrize("queue", ["", "bad/q", "a b", "x" * 129, "-leading"])
def test_bad_queue_names_are_refused_before_any_request(queue: str) -> None:
    with ApiClient("http://127.0.0.1:1", None) as api, pytest.raises(InputError, match="not a queue name"):
        api.enqueue(queue, {"url": "http://127.0.0.1:9/"})


@pytest.mark.parametrize("task_id", ["", "a/b", "x" * 65, "a\x00b", "a\nb"])
def test_bad_task_ids_are_refused_before_any_request(task_id: str) -> None:
    with ApiClient("http://127.0.0.1:1", None) as api, pytest.raises(InputError, match="not a task id"):
        api.task(task_id)


@pytest.mark.parametrize(("value", "encoded"), [("task_1", "task_1"), ("a?b", "a%3Fb"), ("..", "%2E%2E")])
def test_ids_stay_one_path_segment(value: str, encoded: str) -> None:
    assert _segment(value) == encoded


@pytest.mark.parametrize(
    ("call", "says"),
    [(lambda api: api.endpoint(""), "not an endpoint id (ep_…)"),
     (lambda api: api.endpoint_secret("a/b"), "not an endpoint id"),
     (lambda api: api.set_enabled("x" * 65, True), "not an endpoint id"),
     (lambda api: api.delete_endpoint("a\nb"), "not an endpoint id"),
     (lambda api: api.event("evt/1"), "not an event id (evt_…)")],
)  # fmt: skip
def test_bad_endpoint_and_event_ids_are_refused_before_any_request(
    call: Callable[[ApiClient], object], says: str
) -> None:
    with ApiClient("http://127.0.0.1:1", None) as api, pytest.raises(InputError, match=re.escape(says)):
        call(api)


def answering(status: int, body: bytes = b"") -> ApiClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": "application/json"})

    return ApiClient("http://127.0.0.1:1", None, transport=httpx.MockTransport(handler))


def test_a_delete_answered_204_without_a_body_succeeds() -> None:
    with answering(204) as api:
        api.delete_endpoint("ep_1")


def test_publish_tells_a_new_event_from_an_idempotency_match() -> None:
    event = b'{"id": "evt_1", "deliveries": []}'
    with answering(201, event) as api:
        assert api.publish({"type": "a", "payload": 1}) == ({"id": "evt_1", "deliveries": []}, True)
    with answering(200, event) as api:
        assert api.publish({"type": "a", "payload": 1})[1] is False
    problem = b'{"status": 422, "detail": "The request is invalid: body.type: bad"}'
    with answering(422, problem) as api, pytest.raises(ClientError, match="422 Unprocessable Entity: The"):
        api.publish({"type": "a b", "payload": 1})
