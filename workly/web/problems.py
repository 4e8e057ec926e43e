"""RFC 9457 problem details: every error the API returns is ``application/problem+json``.

Each kind of problem has a stable ``type`` URI (``urn:workly:problem:<slug>``) that
clients can branch on; ``detail`` is for people. No stack trace ever leaves the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from workly.errors import (
    ConflictError,
    InvalidEventType,
    InvalidOperation,
    InvalidPayload,
    InvalidQueueConfig,
    InvalidSchedule,
    NotFoundError,
    PermissionDenied,
    ReservedName,
    StorageConflict,
    StorageFull,
    StorageUnavailable,
    TooLarge,
)
from workly.media import is_json_type
from workly.web.responses import JSONResponse

log = logging.getLogger("workly.api")
MEDIA_TYPE = "application/problem+json"

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_SLUGS = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    413: "too-large",
    415: "unsupported-media-type",
    422: "validation",
    500: "internal",
    503: "unavailable",
}


class ProblemResponse(JSONResponse):
    media_type = MEDIA_TYPE


def problem(status: int, detail: str, slug: str | None = None, **extra: Any) -> ProblemResponse:
    body = {
        "type": f"urn:workly:problem:{slug or _SLUGS.get(status, 'error')}",
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        **extra,
    }
    return ProblemResponse(body, status_code=status)


def unsupported_media_type(content_type: str | None) -> ProblemResponse:
    sent = f"not {content_type}" if content_type else "the request had no content-type"
    return problem(415, f"Send the body as JSON with content-type: application/json ({sent}).")


def _validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    errors = []
    for error in exc.errors():
        location = [str(part) for part in error.get("loc", ())]
        errors.append({"location": location, "message": error.get("msg", "invalid")})
    return errors


async def _on_validation(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, RequestValidationError)
    if any(error.get("type") == "json_invalid" for error in exc.errors()):
        return problem(400, "The request body is not valid JSON.", "malformed-json")
    content_type = request.headers.get("content-type")
    body_errors = any(tuple(error.get("loc", ()))[:1] == ("body",) for error in exc.errors())
    if body_errors and not (content_type and is_json_type(content_type)):
        return unsupported_media_type(content_type)
    errors = _validation_errors(exc)
    summary = "; ".join(f"{'.'.join(e['location'])}: {e['message']}" for e in errors[:5])
    return problem(422, f"The request is invalid: {summary}", "validation", errors=errors)


async def _on_http(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else _TITLES.get(exc.status_code, "Error")
    response = problem(exc.status_code, detail)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def _not_found(exc: Exception, where: str) -> ProblemResponse:
    return problem(404, str(exc), "not-found")


def _conflict(exc: Exception, where: str) -> ProblemResponse:
    if isinstance(exc, StorageConflict):  # the database's own words, for the operator only
        log.warning("write conflict on %s: %s", where, exc.__cause__)
    return problem(409, str(exc), "conflict")


def _invalid_config(exc: Exception, where: str) -> ProblemResponse:
    return problem(422, str(exc), "invalid-queue-config")


def _invalid_operation(exc: Exception, where: str) -> ProblemResponse:
    return problem(422, str(exc), "invalid-operation")


def _invalid_schedule(exc: Exception, where: str) -> ProblemResponse:
    return problem(422, str(exc), "invalid-schedule")


def _invalid_event(exc: Exception, where: str) -> ProblemResponse:
    assert isinstance(exc, InvalidEventType | InvalidPayload)
    slug = "invalid-payload" if isinstance(exc, InvalidPayload) else "invalid-event-type"
    errors = [{"path": path, "message": message} for path, message in exc.errors]
    return problem(422, str(exc), slug, errors=errors)


def _reserved(exc: Exception, where: str) -> ProblemResponse:
    return problem(422, str(exc), "reserved-name")


def _forbidden(exc: Exception, where: str) -> ProblemResponse:
    assert isinstance(exc, PermissionDenied)
    return problem(403, str(exc), "forbidden", role=exc.role, lacks=exc.lacks)


def _too_large(exc: Exception, where: str) -> ProblemResponse:
    return problem(413, str(exc), "too-large")


def _unavailable(exc: Exception, where: str) -> ProblemResponse:
    log.error("storage error on %s: %s", where, exc)
    return problem(503, "The database is unavailable; retry later.", "unavailable")


def _full(exc: Exception, where: str) -> ProblemResponse:
    log.error("storage error on %s: %s", where, exc)
    return problem(
        503,
        "A disk the database writes to is full: this request's write was rolled back, nothing "
        "of it was stored. Retry once space is freed; Workly goes on by itself.",
        "unavailable",
    )


def _unexpected(exc: Exception, where: str) -> ProblemResponse:
    log.error("unhandled error on %s", where, exc_info=exc)
    return problem(500, "An unexpected error occurred; it has been logged.", "internal")


# Workly's errors → problems, most specific first. A database that is down or restarting
# answers 503 (retry later), not 500; any other error (a StorageError included) is a 500.
_DOMAIN_PROBLEMS: list[tuple[tuple[type[Exception], ...], Callable[[Exception, str], ProblemResponse]]] = [
    ((NotFoundError,), _not_found),
    ((ConflictError,), _conflict),
    ((InvalidQueueConfig,), _invalid_config),
    ((InvalidOperation,), _invalid_operation),
    ((InvalidSchedule,), _invalid_schedule),
    ((InvalidEventType, InvalidPayload), _invalid_event),
    ((ReservedName,), _reserved),
    ((TooLarge,), _too_large),
    ((PermissionDenied,), _forbidden),
    ((StorageFull,), _full),
    ((StorageUnavailable,), _unavailable),
    ((Exception,), _unexpected),
]


def problem_for_exception(scope: Scope, exc: Exception) -> ProblemResponse:
    """The problem an exception raised while serving ``scope`` is answered with."""
    where = f"{scope.get('method', '?')} {scope.get('path', '?')}"
    for types, build in _DOMAIN_PROBLEMS:
        if isinstance(exc, types):
            return build(exc, where)
    raise AssertionError("Exception is the last entry")  # pragma: no cover


async def _on_domain_error(request: Request, exc: Exception) -> ProblemResponse:
    return problem_for_exception(request.scope, exc)


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    for types, _ in _DOMAIN_PROBLEMS:
        for exception_type in types:
            app.add_exception_handler(exception_type, _on_domain_error)
