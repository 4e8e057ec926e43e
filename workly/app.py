"""The ASGI application: the API and the dashboard over one service, behind the guards.

This is where the adapters meet (they never import each other): ``create_app`` takes a
built ``Service`` and returns the app that serves it, whose lifespan starts and stops the
service. `workly dev` and `workly serve`, and each worker of `workly serve --workers`, call it
(workly/cli/serving.py, where signals are handled: a second Ctrl-C stops the service at once);
``app_from_env`` is the same app as a uvicorn factory.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.types import ASGIApp

from workly import __version__, logs
from workly.access import Principal
from workly.api import (
    audit,
    endpoints,
    event_types,
    events,
    health,
    keys,
    operations,
    queues,
    reference,
    schedules,
    tasks,
    tenants,
)
from workly.api.fast_enqueue import FastEnqueue
from workly.audit import AuditEntry
from workly.config import Settings
from workly.errors import ConfigError, ServiceNotRunning
from workly.service import Service
from workly.ui.pages import install_dashboard
from workly.web.answer_headers import AnswerHeaders
from workly.web.audit_trail import AuditTrail
from workly.web.auth_failures import AuthFailures
from workly.web.browser_guards import LocalHostsOnly, SameOriginWrites
from workly.web.guards import BearerTokens, RequestSizeLimit
from workly.web.http_protocol import GuardedHttpToolsProtocol, guarded_protocol
from workly.web.principals import OpenAccess
from workly.web.problems import install_problem_handlers
from workly.web.tokens import TokenSet

log = logging.getLogger("workly.audit")


def create_app(service: Service, *, anonymous: bool = False) -> ASGIApp:
    """The app serving ``service``; nothing connects until its lifespan starts the service.
    Without API tokens it refuses to build unless ``anonymous`` says so (`workly dev`): an
    app served some other way (uvicorn with the factory, say) must not end up open by
    accident. (Tests that start the service themselves call the app without a lifespan.)"""
    settings = service.settings
    if not settings.tokens() and not anonymous:
        raise ConfigError("WORKLY_API_TOKENS is required: the API answers only requests with a bearer token")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(
        title="Workly",
        version=__version__,
        summary="HTTP delivery service: webhook dispatcher and HTTP task queue",
        lifespan=lifespan,
        docs_url=None,  # workly/api/reference.py serves /docs
        redoc_url=None,
    )
    app.state.service = service
    install_problem_handlers(app)
    app.include_router(tasks.router)
    app.include_router(queues.router)
    app.include_router(endpoints.router)
    app.include_router(events.router)
    app.include_router(event_types.router)
    app.include_router(operations.router)
    app.include_router(schedules.router)
    app.include_router(tenants.router)
    app.include_router(keys.router)
    app.include_router(audit.router)
    app.include_router(health.router)
    app.include_router(health.metrics_router)
    app.include_router(reference.router)
    app.add_api_route("/", _to_the_dashboard, methods=["GET"], include_in_schema=False)
    tokens = TokenSet(settings.tokens())
    # One count of failed authentications per app: every 401, the login form's too.
    failures = AuthFailures()
    install_dashboard(app, tokens)
    if tokens:
        _declare_bearer_auth(app)
    return _guarded(FastEnqueue(app, service), service, tokens, failures)


async def _to_the_dashboard() -> RedirectResponse:
    """A browser pointed at the server's address lands on the dashboard."""
    return RedirectResponse("/ui", status_code=303)


def _declare_bearer_auth(app: FastAPI) -> None:
    """Say in the OpenAPI schema that the API takes a bearer token, so the Authorize button of
    /docs sends it with every "Try it out"."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()  # FastAPI's schema, cached in app.openapi_schema
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "an API key (wk_…) or one of WORKLY_API_TOKENS",
                }
            }
            schema["security"] = [{"bearer": []}]
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]


def _guarded(app: ASGIApp, service: Service, tokens: TokenSet, failures: AuthFailures) -> ASGIApp:
    """Header checks first (a refused caller cannot make the server read a body), then the
    size limit. Without tokens (`workly dev`) only IP addresses and localhost are answered.
    Every answer, a refusal too, carries the headers of answer_headers.py; every refusal and
    every change goes into the audit log (web/audit_trail.py)."""
    settings = service.settings
    limited = RequestSizeLimit(app, settings.max_request_bytes)

    async def look_up_key(offered: bytes) -> Principal | None:
        return await service.keys.authenticate(offered)

    async def look_up_session(cookie: str) -> Principal | None:
        return await service.sessions.principal(cookie, tokens.opened_session)

    async def record(entry: AuditEntry) -> None:
        try:
            await service.audit.record(entry)
        except ServiceNotRunning:  # a request answered while the service starts or stops
            log.warning(
                "audit entry %s %s not recorded: the service is not running", entry.action, entry.target
            )

    def trail(guarded: ASGIApp) -> ASGIApp:
        return AnswerHeaders(AuditTrail(guarded, record, service.now, failures))

    if not tokens:
        return trail(LocalHostsOnly(SameOriginWrites(OpenAccess(limited, look_up_key))))
    public = (("/health",) if settings.public_health else ()) + (
        ("/metrics",) if settings.public_metrics else ()
    )
    return trail(
        SameOriginWrites(BearerTokens(limited, tokens, public, keys=look_up_key, sessions=look_up_session))
    )


def http_protocol(settings: Settings) -> type[GuardedHttpToolsProtocol]:
    """The HTTP protocol uvicorn serves the app with (its ``http=``): the connection limit and
    the head and body deadlines of web/http_protocol.py."""
    return guarded_protocol(settings.max_connections)


def app_from_env() -> ASGIApp:
    """uvicorn factory (``workly.app:app_from_env``): settings from WORKLY_* variables.
    Each worker process uvicorn spawns builds its app here, so it sets up logging too."""
    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    return create_app(Service(settings))
