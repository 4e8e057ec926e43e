"""A small synchronous client of API v1 (httpx), for the CLI commands."""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any, BinaryIO
from urllib.parse import quote

import httpx

from workly.client.inputs import InputError
from workly.models import is_queue_name

DEFAULT_SERVER = "http://127.0.0.1:7337"
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")  # a token is sent as it is, in a header
_NOT_IN_ID = re.compile(r"[\x00-\x1f\x7f]|/")  # control characters, and a path separator
TIMEOUT = httpx.Timeout(30.0, connect=5.0)


class ClientError(Exception):
    """The server could not be asked, or answered with an error; the message says which.
    ``unreachable``: it did not answer, or answered 502-504 (down or restarting: asking
    again later may work)."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


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

    def enqueue(self, queue: str, task: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The task as stored, and whether it is new (False: an idempotency key matched)."""
        response = self._request("POST", f"/v1/queues/{_queue(queue)}/tasks", json=task)
        return self._answer(response), response.status_code == 201

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

    def queue(self, queue: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/queues/{_queue(queue)}")

    def configure_queue(self, queue: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Change some of a queue's settings (PATCH); a queue that does not exist yet is made
        with them and the defaults for the rest (PUT)."""
        path = f"/v1/queues/{_queue(queue)}"
        response = self._request("PATCH", path, json=changes)
        if response.status_code == 404:
            return self._call("PUT", path, json=changes)
        return self._answer(response)

    def purge_queue(self, queue: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/queues/{_queue(queue)}/purge")

    def delete_queue(self, queue: str) -> None:
        self._call("DELETE", f"/v1/queues/{_queue(queue)}", empty=True)

    def set_paused(self, queue: str, paused: bool) -> dict[str, Any]:
        return self._call("POST", f"/v1/queues/{_queue(queue)}/{'pause' if paused else 'resume'}")

    # Endpoints and events (the webhook platform).

    def endpoints(self, tenant: str | None, limit: int, cursor: str | None) -> dict[str, Any]:
        params = {"tenant": tenant, "limit": limit, "cursor": cursor}
        return self._call("GET", "/v1/endpoints", params={k: v for k, v in params.items() if v is not None})

    def endpoint(self, endpoint_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/endpoints/{_endpoint(endpoint_id)}")

    def endpoint_secret(self, endpoint_id: str) -> str:
        secret: str = self._call("GET", f"/v1/endpoints/{_endpoint(endpoint_id)}/secret")["signing_secret"]
        return secret

    def create_endpoint(self, endpoint: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/endpoints", json=endpoint)

    def set_enabled(self, endpoint_id: str, enabled: bool) -> dict[str, Any]:
        action = "enable" if enabled else "disable"
        return self._call("POST", f"/v1/endpoints/{_endpoint(endpoint_id)}/{action}")

    def delete_endpoint(self, endpoint_id: str) -> None:
        self._call("DELETE", f"/v1/endpoints/{_endpoint(endpoint_id)}", empty=True)

    def publish(self, event: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The event as stored, and whether it is new (False: an idempotency key matched)."""
        response = self._request("POST", "/v1/events", json=event)
        return self._answer(response), response.status_code == 201

    def events(
        self, event_type: str | None, tenant: str | None, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        params = {"type": event_type, "tenant": tenant, "limit": limit, "cursor": cursor}
        return self._call("GET", "/v1/events", params={k: v for k, v in params.items() if v is not None})

    def event(self, event_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/events/{_id(event_id, 'an event id (evt_…)')}")

    # Bulk operations (retry or cancel every task a filter matches).

    def create_operation(self, action: str, task_filter: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/operations", json={"action": action, "filter": task_filter})

    def operations(self, limit: int, cursor: str | None) -> dict[str, Any]:
        params = {"limit": limit, "cursor": cursor}
        return self._call("GET", "/v1/operations", params={k: v for k, v in params.items() if v is not None})

    def operation(self, operation_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/operations/{_id(operation_id, 'an operation id (op_…)')}")

    # Schedules (cron that enqueues a task or publishes an event).

    def schedules(self, limit: int, cursor: str | None) -> dict[str, Any]:
        params = {"limit": limit, "cursor": cursor}
        return self._call("GET", "/v1/schedules", params={k: v for k, v in params.items() if v is not None})

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/schedules/{_schedule(schedule_id)}")

    def create_schedule(self, schedule: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/schedules", json=schedule)

    def update_schedule(self, schedule_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Change the fields in ``changes`` (``name: None`` removes the name); the others stay."""
        return self._call("PATCH", f"/v1/schedules/{_schedule(schedule_id)}", json=changes)

    def set_schedule_paused(self, schedule_id: str, paused: bool) -> dict[str, Any]:
        action = "pause" if paused else "resume"
        return self._call("POST", f"/v1/schedules/{_schedule(schedule_id)}/{action}")

    def trigger_schedule(self, schedule_id: str) -> dict[str, Any]:
        """The schedule after firing once now: its last_task_id or last_event_id is what it made."""
        return self._call("POST", f"/v1/schedules/{_schedule(schedule_id)}/trigger")

    def delete_schedule(self, schedule_id: str) -> None:
        self._call("DELETE", f"/v1/schedules/{_schedule(schedule_id)}", empty=True)

    # Endpoints: changes, recovery, secret rotation.

    def update_endpoint(self, endpoint_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        return self._call("PATCH", f"/v1/endpoints/{_endpoint(endpoint_id)}", json=changes)

    def recover_endpoint(self, endpoint_id: str, since: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/endpoints/{_endpoint(endpoint_id)}/recover", json={"since": since})

    def replay_endpoint(self, endpoint_id: str, since: str) -> dict[str, Any]:
        """The replay operation, as it started (it runs in the background)."""
        return self._call("POST", f"/v1/endpoints/{_endpoint(endpoint_id)}/replay", json={"since": since})

    def test_endpoint(self, endpoint_id: str, event_type: str | None) -> dict[str, Any]:
        """The test delivery's task."""
        body = None if event_type is None else {"type": event_type}
        return self._call("POST", f"/v1/endpoints/{_endpoint(endpoint_id)}/test", json=body)

    # The event catalogue.

    def event_types(self, include_deprecated: bool, limit: int, cursor: str | None) -> dict[str, Any]:
        params = _given({"include_deprecated": include_deprecated or None, "limit": limit, "cursor": cursor})
        return self._call("GET", "/v1/event-types", params=params)

    def event_type(self, event_type: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/event-types/{_id(event_type, 'an event type')}")

    def put_event_type(self, event_type: str, fields: dict[str, Any]) -> dict[str, Any]:
        return self._call("PUT", f"/v1/event-types/{_id(event_type, 'an event type')}", json=fields)

    def update_event_type(self, event_type: str, changes: dict[str, Any]) -> dict[str, Any]:
        return self._call("PATCH", f"/v1/event-types/{_id(event_type, 'an event type')}", json=changes)

    def delete_event_type(self, event_type: str) -> None:
        self._call("DELETE", f"/v1/event-types/{_id(event_type, 'an event type')}", empty=True)

    # Tenants, API keys, the audit log.

    def tenants(self, limit: int, cursor: str | None) -> dict[str, Any]:
        return self._call("GET", "/v1/tenants", params=_given({"limit": limit, "cursor": cursor}))

    def tenant(self, tenant: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/tenants/{_id(tenant, 'a tenant')}")

    def put_tenant(self, tenant: str, fields: dict[str, Any]) -> dict[str, Any]:
        return self._call("PUT", f"/v1/tenants/{_id(tenant, 'a tenant')}", json=fields)

    def update_tenant(self, tenant: str, changes: dict[str, Any]) -> dict[str, Any]:
        return self._call("PATCH", f"/v1/tenants/{_id(tenant, 'a tenant')}", json=changes)

    def erase_tenant(self, tenant: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/tenants/{_id(tenant, 'a tenant')}")

    def export_tenant(self, tenant: str, sink: BinaryIO) -> int:
        """Stream the tenant's JSON Lines into ``sink``; how many lines. An export cut short
        (the server stopped, the connection broke) raises: never a silently shorter file."""
        path = f"/v1/tenants/{_id(tenant, 'a tenant')}/export"
        try:
            with self._http.stream("GET", path, timeout=httpx.Timeout(60.0, connect=5.0)) as response:
                if not response.is_success:
                    response.read()
                    self._answer(response)  # raises the server's problem
                lines = 0
                for chunk in response.iter_bytes():
                    sink.write(chunk)
                    lines += chunk.count(b"\n")
                return lines
        except httpx.HTTPError as exc:
            raise ClientError(
                f"the export from {self._server} broke off: {exc or type(exc).__name__}"
            ) from None

    def delete_task(self, task_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/tasks/{_task(task_id)}", empty=True)

    def delete_event(self, event_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/events/{_id(event_id, 'an event id')}", empty=True)

    def keys(self, limit: int, cursor: str | None) -> dict[str, Any]:
        return self._call("GET", "/v1/keys", params=_given({"limit": limit, "cursor": cursor}))

    def key(self, key_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/keys/{_id(key_id, 'an API key id (key_…)')}")

    def create_key(self, fields: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/keys", json=fields)

    def revoke_key(self, key_id: str) -> None:
        self._call("DELETE", f"/v1/keys/{_id(key_id, 'an API key id (key_…)')}", empty=True)

    def audit(self, filters: dict[str, Any], limit: int, cursor: str | None) -> dict[str, Any]:
        return self._call("GET", "/v1/audit", params=_given({**filters, "limit": limit, "cursor": cursor}))

    def _call(self, method: str, path: str, *, empty: bool = False, **kwargs: Any) -> dict[str, Any]:
        """The JSON object the server answered; ``empty``: a success without a body is {}."""
        response = self._request(method, path, **kwargs)
        if empty and response.is_success and not response.content:
            return {}
        return self._answer(response)

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ClientError(
                f"cannot reach {self._server}: {exc or type(exc).__name__}", unreachable=True
            ) from None

    def _answer(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.is_success and isinstance(body, dict):
            return body
        raise ClientError(
            _describe_failure(response, body), unreachable=response.status_code in (502, 503, 504)
        )


def _queue(name: str) -> str:
    if not is_queue_name(name):
        raise InputError(f"{name!r} is not a queue name: letters, digits, '.', '_', '-', at most 128")
    return name


def _task(task_id: str) -> str:
    return _id(task_id, "a task id (task_…)")


def _endpoint(endpoint_id: str) -> str:
    return _id(endpoint_id, "an endpoint id (ep_…)")


def _schedule(schedule_id: str) -> str:
    return _id(schedule_id, "a schedule id (sch_…)")


def _id(value: str, what: str) -> str:
    """An id as one path segment; what no id can be is refused here, before any request."""
    if not 0 < len(value) <= 64 or _NOT_IN_ID.search(value):
        raise InputError(f"{value!r} is not {what}")
    return _segment(value)


def _segment(value: str) -> str:
    """One path segment, percent-encoded: a '/', '?' or '..' in an id must not reach another route."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _describe_failure(response: httpx.Response, body: Any) -> str:
    """'404 Not Found: task 'x' does not exist' from a problem+json answer, else the status."""
    if response.status_code == 401:  # the detail names the HTTP header; a CLI user sets an option
        return f"401 {response.reason_phrase}: the server wants a valid API token (--token or WORKLY_TOKEN)"
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        where = [
            f"\n  {error['path'] or '(the whole)'}: {error['message']}"
            for error in body.get("errors") or []
            if isinstance(error, dict) and isinstance(error.get("path"), str) and "message" in error
        ]
        return f"{response.status_code} {response.reason_phrase}: {body['detail']}{''.join(where[:10])}"
    return f"{response.status_code} {response.reason_phrase} from {response.request.url}"


def _given(params: dict[str, Any]) -> dict[str, Any]:
    """The query parameters that are set."""
    return {name: value for name, value in params.items() if value is not None}
