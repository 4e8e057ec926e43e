"""A small synchronous client of API v1 (httpx), for the CLI commands."""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from workly.client.inputs import InputError
from workly.models import is_queue_name

DEFAULT_SERVER = "http://127.0.0.1:7337"
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")  # a token is sent as it is, in a header
_NOT_IN_TASK_ID = re.compile(r"[\x00-\x1f\x7f]|/")  # control characters, and a path separator
TIMEOUT = httpx.Timeout(30.0, connect=5.0)


class ClientError(Exception):
    """The server could not be asked, or answered with an error; the message says which."""


class ApiClient:
    def __init__(self, server: str, token: str | None, transport: httpx.BaseTransport | None = None) -> None:
        """Raises InputError for a server URL or a token that cannot be used."""
        if token is not None and not _HEADER_SAFE.fullmatch(token):
            raise InputError("the token holds characters an HTTP header cannot carry")
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._server = server.rstrip("/")
        try:
            url = httpx.URL(self._server)
        except httpx.InvalidURL as exc:
            raise InputError(f"--server {server!r} is not a URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise InputError(f"--server {server!r} is not an http:// or https:// URL")
        self._http = httpx.Client(
            base_url=self._server, headers=headers, timeout=TIMEOUT, transport=transport, trust_env=False
        )

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._http.close()

    def enqueue(self, queue: str, task: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", f"/v1/queues/{_queue(queue)}/tasks", json=task)

    def tasks(self, queue: str | None, status: str | None, limit: int, cursor: str | None) -> dict[str, Any]:
        params = {"queue": queue and _queue(queue), "status": status, "limit": limit, "cursor": cursor}
        return self._call("GET", "/v1/tasks", params={k: v for k, v in params.items() if v is not None})

    def task(self, task_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/tasks/{_task(task_id)}")

    def attempts(self, task_id: str) -> list[dict[str, Any]]:
        attempts: list[dict[str, Any]] = self._call("GET", f"/v1/tasks/{_task(task_id)}/attempts")["attempts"]
        return attempts

    def retry(self, task_id: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/tasks/{_task(task_id)}/retry")

    def cancel(self, task_id: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/tasks/{_task(task_id)}/cancel")

    def queues(self) -> list[dict[str, Any]]:
        queues: list[dict[str, Any]] = self._call("GET", "/v1/queues")["queues"]
        return queues

    def set_paused(self, queue: str, paused: bool) -> dict[str, Any]:
        return self._call("POST", f"/v1/queues/{_queue(queue)}/{'pause' if paused else 'resume'}")

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach {self._server}: {exc or type(exc).__name__}") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.is_success and isinstance(body, dict):
            return body
        raise ClientError(_describe_failure(response, body))


def _queue(name: str) -> str:
    if not is_queue_name(name):
        raise InputError(f"{name!r} is not a queue name: letters, digits, '.', '_', '-', at most 128")
    return name


def _task(task_id: str) -> str:
    if not 0 < len(task_id) <= 64 or _NOT_IN_TASK_ID.search(task_id):
        raise InputError(f"{task_id!r} is not a task id (task_…)")
    return _segment(task_id)


def _segment(value: str) -> str:
    """One path segment, percent-encoded: a '/', '?' or '..' in an id must not reach another route."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _describe_failure(response: httpx.Response, body: Any) -> str:
    """'404 Not Found: task 'x' does not exist' from a problem+json answer, else the status."""
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return f"{response.status_code} {response.reason_phrase}: {body['detail']}"
    return f"{response.status_code} {response.reason_phrase} from {response.request.url}"
