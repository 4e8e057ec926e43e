"""The ASGI application: routes plus a lifespan that owns storage and the dispatcher."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp

from workly import __version__, logs
from workly.api import health, queues, reference, tasks
from workly.api.browser_guards import LocalHostsOnly, SameOriginWrites
from workly.api.fast_enqueue import FastEnqueue
from workly.api.guards import BearerTokens, RequestSizeLimit
from workly.api.problems import install_problem_handlers
from workly.api.runtime import Runtime
from workly.api.tokens import TokenSet
from workly.batching import CoalescedCall
from workly.clock import Clock, system_clock
from workly.config import Settings
from workly.dispatch.deliverer import Deliverer
from workly.dispatch.dispatcher import Dispatcher
from workly.dispatch.http_client import HttpClient
from workly.enqueuer import Enqueuer
from workly.errors import ConfigError
from workly.housekeeping import Housekeeper
from workly.metrics import Metrics
from workly.signing import Signer
from workly.storage import open_storage
from workly.ui.pages import install_dashboard

log = logging.getLogger("workly")


def create_app(settings: Settings, clock: Clock = system_clock, *, anonymous: bool = False) -> ASGIApp:
    """Build the ASGI app; nothing connects until the lifespan starts. Without API tokens it
    refuses to build unless ``anonymous`` says so (`workly dev`): an app served some other
    way (uvicorn with the factory, say) must not end up open by accident."""
    if settings.database_url is None:
        raise ConfigError("WORKLY_DATABASE_URL is required")
    if not settings.tokens() and not anonymous:
        raise ConfigError("WORKLY_API_TOKENS is required: the API answers only requests with a bearer token")
    signer = Signer(settings.signing_secrets())
    database_url = settings.database_url

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        storage = await open_storage(
            database_url, sqlite_synchronous=settings.sqlite_synchronous, db_timeout=settings.db_timeout
        )
        client = HttpClient(max_body=settings.response_snippet_bytes, policy=settings.outbound_policy())
        metrics = Metrics()
        try:
            applied = await storage.migrate()
            if applied:
                log.info("applied migrations %s", applied)
            dispatcher = Dispatcher(
                storage,
                Deliverer(client, signer, clock),
                clock,
                max_in_flight=settings.max_in_flight,
                poll_interval=settings.poll_interval,
                lease_margin=settings.lease_margin,
                result_batch_max=settings.result_batch_max,
                metrics=metrics,
            )
            announcer = CoalescedCall(storage.announce_work, _log_announce_error)

            def committed() -> None:
                dispatcher.wake()
                announcer.trigger()

            enqueuer = Enqueuer(storage, clock, committed, metrics=metrics)
            app.state.runtime = Runtime(
                settings=settings,
                storage=storage,
                dispatcher=dispatcher,
                enqueuer=enqueuer,
                clock=clock,
                metrics=metrics,
            )
            housekeeper = Housekeeper(
                storage,
                clock,
                reap_interval=settings.reap_interval,
                wake_dispatcher=dispatcher.wake,
                vacuum_interval=settings.vacuum_interval,
                retention=settings.retention,
                metrics=metrics,
            )
            # An API-only process listens too: that is how it learns that dispatching
            # processes exist, and so announces its enqueues to them.
            await storage.listen_for_work(dispatcher.wake if settings.dispatch else _nobody)
            if settings.dispatch:
                dispatcher.start()
                await housekeeper.start()
            try:
                yield
            finally:
                await housekeeper.stop()
                await enqueuer.drain()
                await announcer.drain()
                await dispatcher.stop(grace=settings.shutdown_grace)
        finally:
            await client.close()
            await storage.close()

    app = FastAPI(
        title="Workly",
        version=__version__,
        summary="HTTP delivery service: webhook dispatcher and HTTP task queue",
        lifespan=lifespan,
        docs_url=None,  # workly/api/reference.py serves /docs
        redoc_url=None,
    )
    install_problem_handlers(app)
    app.include_router(tasks.router)
    app.include_router(queues.router)
    app.include_router(health.router)
    app.include_router(health.metrics_router)
    app.include_router(reference.router)
    tokens = TokenSet(settings.tokens())
    install_dashboard(app, tokens)
    if tokens:
        _declare_bearer_auth(app)
    return _guarded(FastEnqueue(app, lambda: app.state.runtime), settings, tokens)


def _declare_bearer_auth(app: FastAPI) -> None:
    """Say in the OpenAPI schema that the API takes a bearer token, so the Authorize button of
    /docs sends it with every "Try it out"."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()  # FastAPI's schema, cached in app.openapi_schema
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "description": "one of WORKLY_API_TOKENS"}
            }
            schema["security"] = [{"bearer": []}]
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]


def _guarded(app: ASGIApp, settings: Settings, tokens: TokenSet) -> ASGIApp:
    """Header checks first (a refused caller cannot make the server read a body), then the
    size limit. Without tokens (`workly dev`) only IP addresses and localhost are answered."""
    limited = RequestSizeLimit(app, settings.max_request_bytes)
    if not tokens:
        return LocalHostsOnly(SameOriginWrites(limited))
    public = (("/health",) if settings.public_health else ()) + (
        ("/metrics",) if settings.public_metrics else ()
    )
    return SameOriginWrites(BearerTokens(limited, tokens, public))


def _nobody() -> None:
    """An API-only process has no dispatcher to wake."""


def _log_announce_error(exc: Exception) -> None:
    # Other processes still find the work at their next poll.
    log.warning("could not notify other processes of new work: %s", exc)


def app_from_env() -> ASGIApp:
    """uvicorn factory (``workly.api.app:app_from_env``): settings from WORKLY_* variables.
    Each worker process uvicorn spawns builds its app here, so it sets up logging too."""
    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    return create_app(settings)
