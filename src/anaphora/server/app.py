"""The ASGI application: one :class:`Components` per app, built at startup unless given, drained at shutdown.
The service state the routes share is in :mod:`anaphora.server.state`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware import Middleware

from anaphora import __version__
from anaphora.app import Components
from anaphora.server import errors, openapi_errors, web, widget
from anaphora.server.asgi import HeadAsGetMiddleware
from anaphora.server.auth import build_authenticator
from anaphora.server.coordination import build_session_store
from anaphora.server.dev_guard import DevModeGuard
from anaphora.server.limits import BodyLimitMiddleware
from anaphora.server.logs import RequestIdMiddleware
from anaphora.server.metrics import HttpMetrics, MetricsMiddleware
from anaphora.server.paths import NulPathMiddleware
from anaphora.server.public_origins import PublicOriginMiddleware
from anaphora.server.routes import (
    chat,
    conversation_items,
    conversations,
    documents,
    feedback,
    memories,
    ops,
    report,
    responses,
    session,
    sources,
    users,
    visitor,
)
from anaphora.server.sessions import SessionHeaderMiddleware
from anaphora.server.state import Service, running_service
from anaphora.server.visitors import PublicAuth, VisitorTokens
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
    visitors = VisitorTokens(settings.public)
    auth = build_authenticator(settings.server)
    if settings.public.public_mode:  # anonymous visitors too, each with a signed session (visitors.py)
        auth = PublicAuth(auth, visitors)
    sessions = build_session_store(settings, busy=lambda user_id: _turns_in_flight(app, user_id))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with running_service(settings, auth, sessions, components, owns=owned, visitors=visitors) as service:
            app.state.service = service
            try:
                yield
            finally:
                del app.state.service  # routes answer "not started" rather than use a stopping service

    app = FastAPI(
        title="Anaphora",
        version=__version__,
        description="Conversational RAG where follow-up questions work. Reference: docs/server.md.",
        lifespan=lifespan,
        docs_url="/docs" if settings.server.api_docs else None,  # third-party scripts on this origin: opt-in only
        redoc_url="/redoc" if settings.server.api_docs else None,
        middleware=middleware(settings, lambda: _http_metrics(app)),
    )
    errors.install(app)
    openapi_errors.install(app)  # the error responses and media types the server really answers with
    routers = (chat, responses, conversations, conversation_items, feedback, documents, memories, session, users)
    for module in (*routers, visitor, report, sources, ops):
        app.include_router(module.router)
    web.install(app, settings.server, widget=settings.public.public_mode)  # the chat page at / (web_ui)
    widget.install(app, settings.public)  # the embeddable widget (public mode)
    return app


def _running(app: FastAPI) -> Service | None:
    return getattr(app.state, "service", None)


def _turns_in_flight(app: FastAPI, user_id: str) -> bool:
    service = _running(app)
    return service is not None and service.runner.in_flight_for(user_id) > 0


def _http_metrics(app: FastAPI) -> HttpMetrics | None:
    service = _running(app)
    return service.http_metrics if service is not None else None


def middleware(settings: Settings, http_metrics: Callable[[], HttpMetrics | None]) -> list[Middleware]:
    """The service's middleware, in one ordered list, outermost first; ``http_metrics``: the running service's."""
    server = settings.server
    guard = [Middleware(DevModeGuard, allowed_hosts=server.dev_allowed_hosts)] if server.auth == "none" else []
    allowed = settings.public.public_origins
    public = [Middleware(PublicOriginMiddleware, allowed=allowed)] if settings.public.public_mode else []
    return [
        Middleware(NoSniffMiddleware),  # nosniff on every response, the error responses included
        Middleware(RequestIdMiddleware),  # every record of the request carries its id
        Middleware(MetricsMiddleware, metrics=http_metrics),  # counts the 413s too
        Middleware(SessionHeaderMiddleware),
        *public,  # public mode: the Origin allow-list and CORS (public_origins.py)
        *guard,  # auth 'none': answer only this machine's own pages (dev_guard.py)
        Middleware(BodyLimitMiddleware, max_bytes=settings.server.max_request_bytes),
        Middleware(HeadAsGetMiddleware),  # logs and metrics still see the HEAD
        Middleware(NulPathMiddleware),  # a NUL in a path id: 404 on every store
        Middleware(errors.CatchAllMiddleware),  # innermost: any exception becomes the error shape
    ]


def from_environment() -> FastAPI:
    """Zero-argument factory for ASGI servers: ``uvicorn --factory anaphora.server.app:from_environment``."""
    return create_app(load_settings())
