"""The ASGI application: one :class:`Components` per app, built at startup unless given, drained at shutdown."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from anaphora import __version__
from anaphora.app import Components, build_components, close_local
from anaphora.errors import AnaphoraError
from anaphora.server import errors, openapi_errors, web
from anaphora.server.auth import Authenticator, build_authenticator
from anaphora.server.coordination import build_session_store, build_turn_lock
from anaphora.server.dev_guard import DevModeGuard
from anaphora.server.history_sweeper import HistorySweeper
from anaphora.server.jobs import IngestJobs
from anaphora.server.limits import BodyLimitMiddleware
from anaphora.server.logs import RequestIdMiddleware
from anaphora.server.metrics import HttpMetrics, MetricsMiddleware
from anaphora.server.sessions import SessionHeaderMiddleware
from anaphora.server.turns import TurnRunner
from anaphora.settings import Settings, load_settings

log = logging.getLogger("anaphora.server")


class Service:
    """What the routes share: settings, the authenticator, the components and the turn runner."""

    def __init__(
        self, settings: Settings, auth: Authenticator, components: Components | None, *, owns_components: bool
    ) -> None:
        self.settings = settings
        self.auth = auth
        self._components = components
        self.owns_components = owns_components
        self._runner: TurnRunner | None = None
        self.http_metrics: HttpMetrics | None = None
        self._jobs: IngestJobs | None = None
        self.sweeper: HistorySweeper | None = None
        self.sessions = build_session_store(settings, busy=self._has_turns_in_flight)

    def _has_turns_in_flight(self, user_id: str) -> bool:
        return self._runner is not None and self._runner.in_flight_for(user_id) > 0

    @property
    def components(self) -> Components:
        if self._components is None:
            raise RuntimeError("the service has not started (the ASGI lifespan did not run)")
        return self._components

    @property
    def runner(self) -> TurnRunner:
        if self._runner is None:
            raise RuntimeError("the service has not started (the ASGI lifespan did not run)")
        return self._runner

    @property
    def jobs(self) -> IngestJobs:
        if self._jobs is None:
            raise RuntimeError("the service has not started (the ASGI lifespan did not run)")
        return self._jobs

    async def start(self) -> None:
        if self._components is None:
            try:
                self._components = build_components(self.settings)
            except AnaphoraError as exc:
                log.error("cannot start: %s%s", exc.message, f" (fix: {exc.hint})" if exc.hint else "")
                raise
        try:  # a networked store (PostgreSQL) connects and migrates now, not on first use
            await self._components.conversations.open()
        except AnaphoraError as exc:
            log.error("cannot start: %s%s", exc.message, f" (fix: {exc.hint})" if exc.hint else "")
            if self.owns_components:
                close_local(self._components)
                self._components = None
            raise
        engine = self._components.engine
        self._runner = runner = TurnRunner(
            engine, max_per_user=self.settings.max_concurrent_turns_per_user, lock=build_turn_lock(self.settings)
        )
        self.http_metrics = HttpMetrics.of(engine.metrics.registry)
        self.http_metrics.turns_in_flight.set_function(lambda: runner.in_flight)
        components = self._components
        self._jobs = IngestJobs(components.ingestor, components.corpus, self.settings.data_dir / "uploads")
        if self.settings.history_ttl_s > 0:
            self.sweeper = HistorySweeper(
                components.conversations,
                runner,
                ttl_s=self.settings.history_ttl_s,
                interval_s=self.settings.history_sweep_interval_s,
            )
            self.sweeper.start()

    async def stop(self) -> None:
        """Let in-flight turns finish (they are stored even if their clients left), then background work."""
        if self.sweeper is not None:
            await self.sweeper.stop()
            self.sweeper = None
        if self._runner is not None:
            pending = await self._runner.drain(self.settings.shutdown_grace_s)
            if pending:
                log.warning(
                    "shutting down with %d turn(s) still running after %.0f s", pending, self.settings.shutdown_grace_s
                )
        if self._jobs is not None and await self._jobs.drain(self.settings.shutdown_grace_s):
            log.warning("shutting down with an ingestion job still running")
        if self._runner is not None:
            await self._runner.lock.aclose()
        await self.sessions.aclose()
        if self._components is None:
            return
        engine = self._components.engine
        if self.owns_components:
            await engine.aclose()  # drains background work, closes model and reranker clients
            close_local(self._components)
            self._components = None
        else:
            await engine.drain()


def service(request: Request) -> Service:
    return request.app.state.service


def create_app(settings: Settings, *, components: Components | None = None) -> FastAPI:
    """The HTTP service. Auth settings are checked here, so a misconfigured service fails before it listens.

    Given ``components`` stay the caller's: shutdown drains their engine but does not close it or the store.
    Without them, the app builds its own at startup and closes them at shutdown.
    """
    return build_app(settings, components, owns_components=components is None)


def from_environment() -> FastAPI:
    """Zero-argument factory for ASGI servers: ``uvicorn --factory anaphora.server.app:from_environment``."""
    return create_app(load_settings())


def build_app(settings: Settings, components: Components | None, *, owns_components: bool) -> FastAPI:
    """:func:`create_app`, with the ownership of ``components`` explicit (``anaphora serve`` builds them first,
    so that a broken model or store is reported like any CLI error, and hands them over)."""
    from anaphora.server.routes import chat, conversations, documents, ops, session, users

    state = Service(settings, build_authenticator(settings), components, owns_components=owns_components)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.start()
        try:
            yield
        finally:
            await state.stop()

    app = FastAPI(
        title="Anaphora",
        version=__version__,
        description="Conversational RAG where follow-up questions work. Reference: docs/server.md.",
        lifespan=lifespan,
    )
    app.state.service = state
    errors.install(app)
    openapi_errors.install(app)  # the error responses and media types the server really answers with
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    if settings.auth == "none":  # no tokens: answer only this machine's own pages (dev_guard.py)
        app.add_middleware(DevModeGuard, allowed_hosts=settings.dev_allowed_hosts)
    app.add_middleware(SessionHeaderMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=lambda: state.http_metrics)  # counts the 413s too
    app.add_middleware(RequestIdMiddleware)  # outermost: every record of the request carries its id
    for module in (chat, conversations, documents, session, users, ops):
        app.include_router(module.router)
    web.install(app, settings)  # the chat page at / (web_ui) and nosniff on every response
    return app
