"""The client refuses what it cannot send before sending anything (pure: nothing connects)."""

from __future__ import annotations

import pytest

from workly.client.api import ApiClient, _segment
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
