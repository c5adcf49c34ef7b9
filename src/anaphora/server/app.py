"""The ASGI application: one :class:`Components` per app, built at startup unless given, drained at shutdown.
The service state the routes share is in :mod:`anaphora.server.state`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware import Middleware

from anaphora import __version__
from anaphora.app import Components
from anaphora.server import errors, openapi_errors, web
from anaphora.server.asgi import HeadAsGetMiddleware
from anaphora.server.auth import build_authenticator
from anaphora.server.dev_guard import DevModeGuard
from anaphora.server.limits import BodyLimitMiddleware
from anaphora.server.logs import RequestIdMiddleware
from anaphora.server.metrics import MetricsMiddleware
from anaphora.server.paths import NulPathMiddleware
from anaphora.server.routes import (
    chat,
    conversation_items,
    conversations,
    documents,
    memories,
    ops,
    responses,
    session,
    users,
)
from anaphora.server.sessions import SessionHeaderMiddleware
from anaphora.server.state import Service
from anaphora.server.web import NoSniffMiddleware
from anaphora.settings import Settings, load_settings


def create_app(
    settings: Settings, *, components: Components | None = None, owns_components: bool | None = None
) -> FastAPI:
    """The HTTP service. Auth settings are checked here, so a misconfigured service fails before it listens.

    Without ``components`` the app builds its own at startup and closes them at shutdown. Given ones stay the
    caller's (shutdown drains their engine but closes nothing) unless ``owns_components`` hands them over, as
    ``anaphora serve`` does: it builds them first, so that a broken model or store is reported like any CLI error.
    """
    owned = components is None if owns_components is None else owns_components
    service = Service(settings, build_authenticator(settings.server), components, owns_components=owned)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(
        title="Anaphora",
        version=__version__,
        description="Conversational RAG where follow-up questions work. Reference: docs/server.md.",
        lifespan=lifespan,
        docs_url="/docs" if settings.server.api_docs else None,  # third-party scripts on this origin: opt-in only
        redoc_url="/redoc" if settings.server.api_docs else None,
        middleware=middleware(settings, service),
    )
    app.state.service = service
    errors.install(app)
    openapi_errors.install(app)  # the error responses and media types the server really answers with
    for module in (chat, responses, conversations, conversation_items, documents, memories, session, users, ops):
        app.include_router(module.router)
    web.install(app, settings.server)  # the chat page at / (web_ui)
    return app


def middleware(settings: Settings, service: Service) -> list[Middleware]:
    """The service's middleware, in one ordered list, outermost first."""
    server = settings.server
    guard = [Middleware(DevModeGuard, allowed_hosts=server.dev_allowed_hosts)] if server.auth == "none" else []
    return [
        Middleware(NoSniffMiddleware),  # nosniff on every response, the error responses included
        Middleware(RequestIdMiddleware),  # every record of the request carries its id
        Middleware(MetricsMiddleware, metrics=lambda: service.http_metrics),  # counts the 413s too
        Middleware(SessionHeaderMiddleware),
        *guard,  # auth 'none': answer only this machine's own pages (dev_guard.py)
        Middleware(BodyLimitMiddleware, max_bytes=settings.server.max_request_bytes),
        Middleware(HeadAsGetMiddleware),  # logs and metrics still see the HEAD
        Middleware(NulPathMiddleware),  # a NUL in a path id: 404 on every store
        Middleware(errors.CatchAllMiddleware),  # innermost: any exception becomes the error shape
    ]


def from_environment() -> FastAPI:
    """Zero-argument factory for ASGI servers: ``uvicorn --factory anaphora.server.app:from_environment``."""
    return create_app(load_settings())
