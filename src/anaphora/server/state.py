"""What the routes share: the service's state (settings, authenticator, components, turn runner, jobs, sessions),
built and torn down by the app's lifespan, and the FastAPI dependencies that hand it and the caller to a route.

Routes import this module; the app imports the routes: no cycle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from anaphora.app import Components, build_components, close_local, sources_of
from anaphora.errors import AnaphoraError, PermissionDeniedError
from anaphora.ingest.units import UnitsInBackground, UnitsReport
from anaphora.server.auth import Authenticator, Principal
from anaphora.server.coordination import build_turn_lock
from anaphora.server.history_sweeper import HistorySweeper, MemorySweeper
from anaphora.server.jobs import IngestJobs
from anaphora.server.metrics import HttpMetrics
from anaphora.server.public_limits import PublicLimits, build_windows
from anaphora.server.sessions import STATE_KEY
from anaphora.server.turns import TurnRunner
from anaphora.server.visitors import VisitorTokens
from anaphora.settings import Settings
from anaphora.store.protocols import SessionStore

log = logging.getLogger("anaphora.server")
UNITS_STOP_S = 10.0  # a step of the answer units (a slice of passages) ends within this at stop


@dataclass(frozen=True)
class Service:
    """What the routes share while the app runs: made by :func:`running_service` in the app's lifespan, so a route
    never sees a half-started or stopped service (``app.state.service`` exists only between start and stop)."""

    settings: Settings
    auth: Authenticator
    components: Components
    runner: TurnRunner
    jobs: IngestJobs
    sessions: SessionStore
    http_metrics: HttpMetrics
    sweeper: HistorySweeper | None
    memory_sweeper: MemorySweeper | None
    owns_components: bool
    visitors: VisitorTokens  # public mode's anonymous visitors (their signed sessions)
    public_limits: PublicLimits  # public mode's per-visitor and per-site rate limits and daily cap


def _cannot_start(exc: AnaphoraError) -> None:
    log.error("cannot start: %s%s", exc.message, f" (fix: {exc.hint})" if exc.hint else "")


async def _open_components(
    stack: AsyncExitStack, settings: Settings, components: Components | None, owns: bool
) -> Components:
    """The components, built unless given, with their networked stores connected (and migrated) now rather than on
    first use; at stop, owned ones are closed, a caller's only drained."""
    if components is None:
        try:
            components = build_components(settings)
        except AnaphoraError as exc:
            _cannot_start(exc)
            raise
    try:
        await components.conversations.open()
        await components.memory.open()
    except AnaphoraError as exc:
        _cannot_start(exc)
        if owns:
            close_local(components)
        raise
    stack.push_async_callback(components.aclose if owns else components.engine.drain)
    return components


async def _drain(what: str, drain: Callable[[float], Awaitable[int]], grace_s: float) -> None:
    """Let ``what`` finish within ``grace_s`` (turns are stored even if their clients left); warn if some did not."""
    pending = await drain(grace_s)
    if pending:
        log.warning("shutting down with %d %s still running after %.0f s", pending, what, grace_s)


def _sweepers(
    stack: AsyncExitStack, settings: Settings, components: Components, runner: TurnRunner
) -> tuple[HistorySweeper | None, MemorySweeper | None]:
    """The history and memory TTL sweepers the settings ask for, started; each stopped first at shutdown."""
    interval_s = settings.server.history_sweep_interval_s
    history = memory = None
    if settings.server.history_ttl_s > 0:
        history = HistorySweeper(
            components.conversations, runner, ttl_s=settings.server.history_ttl_s, interval_s=interval_s
        )
    if settings.memory.memory_ttl_s is not None:
        memory = MemorySweeper(components.memory, ttl_s=settings.memory.memory_ttl_s, interval_s=interval_s)
    for sweeper in (history, memory):
        if sweeper is not None:
            sweeper.start()
            stack.push_async_callback(sweeper.stop)
    return history, memory


def _answer_units(stack: AsyncExitStack, components: Components) -> UnitsInBackground | None:
    """The answer units still to embed after the passages (:mod:`anaphora.ingest.units`), embedded in a thread from
    the start (an ingestion stopped before they were done) and after each ingestion job; stopped between steps.
    First, in that thread, an index embedded by another embedder (the other precision) is re-embedded: turns are
    refused with a hint until it is, then answered."""
    ingestor = components.ingestor
    if ingestor.needs_reembedding():
        log.warning("the stored passages were embedded by another embedder: re-embedding them in the background")
    if components.answer_units is None:
        if ingestor.needs_reembedding():
            threading.Thread(target=ingestor.reembed_stored, name="anaphora-reembed", daemon=True).start()
        return None
    units = UnitsInBackground(components.answer_units, on_report=_log_units, first=ingestor.reembed_stored)
    stack.callback(units.stop, UNITS_STOP_S)
    if components.answer_units.pending() or ingestor.needs_reembedding():
        units.kick()
    return units


def _log_units(report: UnitsReport) -> None:
    if not report.busy:
        log.info(
            "answer units: %d embedded of %d in %d passages (%.1f s)%s",
            report.embedded,
            report.units,
            report.passages,
            report.seconds,
            "" if report.finished else ", not finished",
        )


@asynccontextmanager
async def running_service(
    settings: Settings,
    auth: Authenticator,
    sessions: SessionStore,
    components: Components | None,
    *,
    owns: bool,
    visitors: VisitorTokens,
) -> AsyncIterator[Service]:
    """The service from start to stop. Each part registers its stop as it starts, so stop runs in the reverse order
    (sweepers, in-flight turns, ingestion jobs, the turn lock, sessions, components) and a failed start undoes
    what had started."""
    grace_s = settings.server.shutdown_grace_s
    async with AsyncExitStack() as stack:
        components = await _open_components(stack, settings, components, owns)
        stack.push_async_callback(sessions.aclose)
        public_limits = PublicLimits(settings.public, build_windows(settings))
        stack.push_async_callback(public_limits.aclose)
        lock = build_turn_lock(settings)
        stack.push_async_callback(lock.aclose)
        units = _answer_units(stack, components)
        jobs = IngestJobs(
            components.ingestor,
            components.corpus,
            settings.data_dir / "uploads",
            sources_of(components),
            after=units.kick if units is not None else None,
        )
        stack.push_async_callback(_drain, "ingestion job(s)", jobs.drain, grace_s)
        runner = TurnRunner(components.engine, max_per_user=settings.server.max_concurrent_turns_per_user, lock=lock)
        stack.push_async_callback(_drain, "turn(s)", runner.drain, grace_s)
        http_metrics = HttpMetrics.of(components.engine.metrics.registry)
        http_metrics.turns_in_flight.set_function(lambda: runner.in_flight)
        history, memory = _sweepers(stack, settings, components, runner)
        yield Service(
            settings=settings,
            auth=auth,
            components=components,
            runner=runner,
            jobs=jobs,
            sessions=sessions,
            http_metrics=http_metrics,
            sweeper=history,
            memory_sweeper=memory,
            owns_components=owns,
            visitors=visitors,
            public_limits=public_limits,
        )


def service(request: Request) -> Service:
    running = getattr(request.app.state, "service", None)
    if running is None:
        raise RuntimeError("the service has not started (the ASGI lifespan did not run)")
    return running


async def current_user(request: Request) -> Principal:
    """The authenticated caller; seeing them starts or refreshes their server-side session."""
    svc = service(request)
    principal = svc.auth.authenticate(request.headers.get("authorization"))
    setattr(request.state, STATE_KEY, (await svc.sessions.touch(principal.user_id)).id)
    return principal


User = Annotated[Principal, Depends(current_user)]
Svc = Annotated[Service, Depends(service)]


async def require_admin(user: User, svc: Svc) -> Principal:
    """Documents and the report are the deployment's, not a user's: they need the 'admin' scope (dev mode:
    everyone but anonymous visitors)."""
    if user.visitor:
        raise visitors_refused("managing documents")
    if svc.settings.server.auth != "none" and not user.admin:
        raise PermissionDeniedError(
            "managing documents and reading the report need administrator rights",
            hint="use a token with the 'admin' scope",
        )
    return user


Admin = Annotated[Principal, Depends(require_admin)]


def visitors_refused(what: str) -> PermissionDeniedError:
    return PermissionDeniedError(
        f"{what} is closed to anonymous visitors (public mode)",
        hint="sign in with a token from the service's operator",
    )


async def refuse_visitors(user: User) -> Principal:
    """For the routes closed to anonymous visitors: long-term memory (and, through :func:`require_admin`, admin)."""
    if user.visitor:
        raise visitors_refused("long-term memory")
    return user


async def admit_visitor_turn(user: User, svc: Svc) -> Principal:
    """A visitor's question counts against public mode's limits (HTTP 429 with the reason when one is reached)."""
    if user.visitor:
        await svc.public_limits.admit_turn(user.user_id, user.site or "")
    return user


def memory_allowed(user: Principal, svc: Service, wanted: bool) -> bool:
    """Whether the turn may recall and write long-term memory: anonymous visitors only when the operator says so."""
    return wanted and (not user.visitor or svc.settings.public.visitor_memory)


VisitorTurn = Annotated[Principal, Depends(admit_visitor_turn)]
