"""What the routes share: the service's state (settings, authenticator, components, turn runner, jobs, sessions),
built and torn down by the app's lifespan, and the FastAPI dependencies that hand it and the caller to a route.

Routes import this module; the app imports the routes: no cycle.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends, Request

from anaphora.app import Components, aclose_components, build_components, close_local, sources_of
from anaphora.errors import AnaphoraError, PermissionDeniedError
from anaphora.server.auth import Authenticator, Principal
from anaphora.server.coordination import build_session_store, build_turn_lock
from anaphora.server.history_sweeper import HistorySweeper, MemorySweeper
from anaphora.server.jobs import IngestJobs
from anaphora.server.metrics import HttpMetrics
from anaphora.server.sessions import STATE_KEY
from anaphora.server.turns import TurnRunner
from anaphora.settings import Settings

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
        self.memory_sweeper: MemorySweeper | None = None
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
            await self._components.memory.open()
        except AnaphoraError as exc:
            log.error("cannot start: %s%s", exc.message, f" (fix: {exc.hint})" if exc.hint else "")
            if self.owns_components:
                close_local(self._components)
                self._components = None
            raise
        engine = self._components.engine
        self._runner = runner = TurnRunner(
            engine, max_per_user=self.settings.server.max_concurrent_turns_per_user, lock=build_turn_lock(self.settings)
        )
        self.http_metrics = HttpMetrics.of(engine.metrics.registry)
        self.http_metrics.turns_in_flight.set_function(lambda: runner.in_flight)
        components = self._components
        self._jobs = IngestJobs(
            components.ingestor, components.corpus, self.settings.data_dir / "uploads", sources_of(components)
        )
        interval_s = self.settings.server.history_sweep_interval_s
        if self.settings.server.history_ttl_s > 0:
            self.sweeper = HistorySweeper(
                components.conversations, runner, ttl_s=self.settings.server.history_ttl_s, interval_s=interval_s
            )
            self.sweeper.start()
        if self.settings.memory.memory_ttl_s is not None:
            self.memory_sweeper = MemorySweeper(
                components.memory, ttl_s=self.settings.memory.memory_ttl_s, interval_s=interval_s
            )
            self.memory_sweeper.start()

    async def stop(self) -> None:
        """Let in-flight turns finish (they are stored even if their clients left), then background work."""
        if self.sweeper is not None:
            await self.sweeper.stop()
            self.sweeper = None
        if self.memory_sweeper is not None:
            await self.memory_sweeper.stop()
            self.memory_sweeper = None
        if self._runner is not None:
            pending = await self._runner.drain(self.settings.server.shutdown_grace_s)
            if pending:
                log.warning(
                    "shutting down with %d turn(s) still running after %.0f s",
                    pending,
                    self.settings.server.shutdown_grace_s,
                )
        if self._jobs is not None and await self._jobs.drain(self.settings.server.shutdown_grace_s):
            log.warning("shutting down with an ingestion job still running")
        if self._runner is not None:
            await self._runner.lock.aclose()
        await self.sessions.aclose()
        if self._components is None:
            return
        engine = self._components.engine
        if self.owns_components:
            await aclose_components(self._components)  # drains background work, closes clients and pools
            close_local(self._components)
            self._components = None
        else:
            await engine.drain()


def service(request: Request) -> Service:
    return request.app.state.service


async def current_user(request: Request) -> Principal:
    """The authenticated caller; seeing them starts or refreshes their server-side session."""
    svc = service(request)
    principal = svc.auth.authenticate(request.headers.get("authorization"))
    setattr(request.state, STATE_KEY, (await svc.sessions.touch(principal.user_id)).id)
    return principal


User = Annotated[Principal, Depends(current_user)]
Svc = Annotated[Service, Depends(service)]


async def require_admin(user: User, svc: Svc) -> Principal:
    """Documents are the deployment's, not a user's: managing them needs the 'admin' scope (dev mode: everyone)."""
    if svc.settings.server.auth != "none" and not user.admin:
        raise PermissionDeniedError(
            "managing documents needs administrator rights", hint="use a token with the 'admin' scope"
        )
    return user


Admin = Annotated[Principal, Depends(require_admin)]
