"""The ASGI application: create_app() builds it; its lifespan owns the context and scheduler."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from governor import __version__
from governor.api import admission, log_redaction, routers
from governor.api.body_limit import BodyLimit
from governor.api.clean_url import CleanUrl
from governor.api.errors import install as install_error_handlers
from governor.bootstrap import DatabaseBehind, build_context, close_context, session_secret
from governor.db.schema import schema_status
from governor.scheduler.runner import Driver
from governor.services.context import ServiceContext
from governor.services.security.page_sessions import Keys
from governor.settings import Settings
from governor.web import build_router as build_web_router


def create_app(settings: Settings, context: ServiceContext | None = None) -> FastAPI:
    """The app. Tests may inject a context; otherwise the lifespan builds one from settings."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx = context or build_context(settings)
        status = schema_status(ctx.engine)
        if not status.at_head:
            raise DatabaseBehind(
                f"database at {status.current or '(empty)'}, head is {status.head}: "
                "run 'governor migrate'"
            )
        app.state.context = ctx
        log_redaction.install()  # after the server configured its logging
        app.state.web_keys = Keys(session_secret(ctx, settings))
        if ctx.notifier is not None:
            ctx.notifier.start()
        driver = Driver(ctx) if settings.scheduler_enabled else None
        if driver is not None:
            driver.start()
        try:
            yield
        finally:
            if driver is not None:
                driver.stop()
            if ctx.notifier is not None:
                ctx.notifier.stop()
            if context is None:
                close_context(ctx)

    app = FastAPI(
        title="gpu-governor",
        version=__version__,
        summary="Holds rented GPU pods under a hard dollar ceiling; saves first, then stops.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(CleanUrl)
    for router in routers():
        app.include_router(router)
    app.include_router(build_web_router())
    return app


def create_admission_app(settings: Settings, context: ServiceContext) -> FastAPI:
    """The Kubernetes admission webhook's app, for its own TLS port: its one route and nothing
    else (no API, no pages, no docs), on the API's context (the API's app owns its life)."""
    app = FastAPI(
        title="gpu-governor admission webhook",
        version=__version__,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.context = context
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=max(settings.max_body_bytes, admission.MAX_BODY_BYTES))
    app.add_middleware(CleanUrl)
    app.include_router(admission.router)
    return app
