"""The enqueue hot path, served beneath the framework.

``POST /v1/queues/{queue}/tasks`` is the request a busy client sends most. Profiling at
1,000 tasks/s (docs/performance.md) put most of its CPU in the framework layers
(middleware, routing, dependency solving), not in Workly. This ASGI wrapper serves a
*valid* enqueue directly: it checks the content type and Idempotency-Key header,
validates the body with the same pydantic model and the same key rule, and stores it
through the same ``enqueue_one`` as the route. Anything else, and every error, is
replayed unchanged into the FastAPI app, whose route gives the one documented answer.
"""

from __future__ import annotations

import re

from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from workly.api.idempotency import DifferentIdempotencyKeys, idempotency_key_of, is_idempotency_key
from workly.api.schemas import TaskIn
from workly.api.tasks import enqueue_one
from workly.media import is_json_type
from workly.models import QUEUE_NAME
from workly.service import Service
from workly.trace_context import TraceContext, from_headers
from workly.web.principals import audit_note_of, principal_of
from workly.web.problems import problem_for_exception
from workly.web.request_body import read_body, replay

# fullmatch, never match with ^…$: "$" also matches before a final newline.
_PATH = re.compile(f"/v1/queues/({QUEUE_NAME})/tasks")


class FastEnqueue:
    def __init__(self, app: ASGIApp, service: Service) -> None:
        self._app = app
        self._service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        match = _PATH.fullmatch(scope["path"])
        if match is None:
            await self._app(scope, receive, send)
            return
        body = await read_body(receive)
        if body is None:
            return  # the client went away mid-body: store nothing, answer no one
        task, idempotency_key, trace = _valid_request(scope, body)
        if task is None:
            await self._app(scope, replay(body), send)
            return
        try:
            scoped = self._service.scoped(principal_of(scope), audit_note_of(scope))
            response = await enqueue_one(scoped, match.group(1), task, idempotency_key, trace)
        except Exception as exc:
            response = problem_for_exception(scope, exc)
        await response(scope, replay(body), send)


_REFUSED: tuple[None, None, None] = (None, None, None)


def _valid_request(scope: Scope, body: bytes) -> tuple[TaskIn | None, str | None, TraceContext | None]:
    """The task, Idempotency-Key and trace context of a request the route would accept,
    else Nones."""
    content_type = header = traceparent = None
    tracestates: list[str] = []
    for name, value in scope["headers"]:  # the first of a repeated header, as Starlette reads it
        if name == b"content-type" and content_type is None:
            content_type = value.decode("latin-1")
        elif name == b"idempotency-key" and header is None:
            header = value.decode("latin-1")
        elif name == b"traceparent" and traceparent is None:
            traceparent = value.decode("latin-1")
        elif name == b"tracestate":
            tracestates.append(value.decode("latin-1"))
    if content_type is None or not is_json_type(content_type):
        return _REFUSED
    if header is not None and not is_idempotency_key(header):
        return _REFUSED
    try:
        task = TaskIn.model_validate_json(body)
        return task, idempotency_key_of(task, header), from_headers(traceparent, tracestates)
    except (ValidationError, DifferentIdempotencyKeys):
        return _REFUSED
