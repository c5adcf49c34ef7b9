"""One place that observes the turn: trace records, Prometheus metrics and OpenTelemetry spans, all written from
each stage's result, the fail-open rule applied to every optional stage, and each stage's changes applied to the
turn's state (only the fields it declares it writes)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from anaphora.metrics import Metrics
from anaphora.pipeline.stage import ReleasingStage, Stage, StageResult, applied
from anaphora.pipeline.state import TurnState
from anaphora.types import ModelCall, StageRecord, StageStatus, TurnTrace

if TYPE_CHECKING:
    from anaphora.pipeline.sink import AnswerSink

log = logging.getLogger("anaphora.pipeline")


class StageObserver:
    def __init__(self, metrics: Metrics, tracer: Any | None = None) -> None:
        """``tracer``: an OpenTelemetry tracer for spans per turn and stage (None: no spans)."""
        self.metrics = metrics
        self.tracer = tracer
        self._stage_series: dict[tuple[str, str | None, StageStatus], tuple[Any, ...]] = {}

    def _span(self, name: str):
        return self.tracer.start_as_current_span(name) if self.tracer is not None else nullcontext()

    @contextmanager
    def turn(self) -> Iterator[Callable[[TurnTrace], None]]:
        """A span around the whole turn; call the yielded function with the finished trace."""
        with self._span("anaphora.turn") as span:

            def finish(trace: TurnTrace) -> None:
                if span is not None:
                    span.set_attribute("anaphora.route", trace.route or "")
                    span.set_attribute("anaphora.retrieval_skipped", trace.retrieval_skipped)
                    span.set_attribute("anaphora.model_calls", trace.model_calls)
                    span.set_attribute("anaphora.prompt_tokens", trace.prompt_tokens)

            yield finish

    async def run(
        self, stage: Stage, state: TurnState, records: list[StageRecord], sink: AnswerSink | None = None
    ) -> TurnState:
        """Run one stage: time it, span it, record it, count it, and return the state with its changes; an optional
        stage that fails degrades to its fallback's changes. A stage that does not apply is not run and leaves no
        record; one whose changes name a field it does not declare fails the turn, with nothing of them applied
        (:func:`~anaphora.pipeline.stage.applied`)."""
        if not stage.applies(state):
            return state
        with self._span(f"anaphora.{stage.name}") as span:
            started = time.perf_counter()
            result = await self._attempt(stage, state, sink)
            ms = (time.perf_counter() - started) * 1000
            if span is not None:
                span.set_attribute("anaphora.status", result.status)
                if result.detail:
                    span.set_attribute("anaphora.detail", result.detail)
        record = StageRecord(name=stage.name, status=result.status, ms=ms, detail=result.detail)
        records.append(record)
        after = applied(stage, state, result.changes)
        self._count(stage, record, state, after)
        return after

    async def _attempt(self, stage: Stage, state: TurnState, sink: AnswerSink | None) -> StageResult:
        running = stage.release(state, sink) if isinstance(stage, ReleasingStage) else stage.run(state)
        try:
            if stage.timeout_s is None:
                return await running
            # a deadline on the running task, not wait_for's new task: no extra trip through the event loop
            async with asyncio.timeout(stage.timeout_s):
                return await running
        except TimeoutError:
            return self._degrade(stage, state, "timeout", f"took over {stage.timeout_s:g}s")
        except Exception as exc:
            return self._degrade(stage, state, "error", f"{type(exc).__name__}: {exc}", exc)

    def _degrade(
        self, stage: Stage, state: TurnState, status: StageStatus, failure: str, exc: Exception | None = None
    ) -> StageResult:
        fallback = stage.fallback(state, failure)
        if fallback is None:  # a required stage: the turn fails
            if exc is None:
                raise TimeoutError(f"stage {stage.name} {failure}")
            raise exc
        changes, note = fallback
        # a timeout is an expected degradation under load; an exception is worth a warning
        level = logging.INFO if status == "timeout" else logging.WARNING
        log.log(level, "stage %s failed open: %s", stage.name, failure, extra={"stage": stage.name, "status": status})
        return StageResult(changes, status, f"{failure}; {note}" if note else failure)

    def _count(self, stage: Stage, record: StageRecord, before: TurnState, after: TurnState) -> None:
        metrics = self.metrics
        seconds, runs, outcomes = self._series(stage, record.status)
        seconds.observe(record.ms / 1000)
        runs.inc()
        if outcomes is not None:
            outcomes.inc()
        if after.skip is not None and before.skip is None:
            metrics.retrievals_skipped.labels(reason=after.skip.reason).inc()
        if after.answer_source == "abstain" and before.answer_source != "abstain":
            metrics.abstentions.inc()
        if after.support and not before.support:
            for verdict in after.support:
                metrics.answer_units.labels(verdict=verdict.verdict, kept=str(verdict.kept).lower()).inc()

    def _series(self, stage: Stage, status: StageStatus) -> tuple[Any, ...]:
        """The stage's labelled metric series, looked up once per stage and outcome (this runs after every stage)."""
        key = (stage.name, stage.counter, status)
        if key not in self._stage_series:
            metrics = self.metrics
            outcomes = None
            if stage.counter is not None:  # made on first use, so a stage of one's own can name a new counter
                outcomes = metrics.counter(stage.counter, f"{stage.name} attempts by outcome").labels(status=status)
            self._stage_series[key] = (
                metrics.stage_seconds.labels(stage=stage.name),
                metrics.stage_runs.labels(stage=stage.name, status=status),
                outcomes,
            )
        return self._stage_series[key]

    async def background(self, name: str, counter: str, work: Awaitable[StageStatus], timeout_s: float) -> StageStatus:
        """Work after the answer (summary updates): timed, counted, never raising; returns its status."""
        started = time.perf_counter()
        with self._span(f"anaphora.{name}"):
            try:
                status: StageStatus = await asyncio.wait_for(work, timeout_s)
            except TimeoutError:
                log.warning("%s timed out", name)
                status = "timeout"
            except Exception as exc:  # fail open: the turn is already answered and stored
                log.warning("%s failed: %s", name, exc)
                status = "error"
        self.metrics.stage_seconds.labels(stage=name).observe(time.perf_counter() - started)
        self.metrics.requests[counter].labels(status=status).inc()
        return status

    def seconds(self, name: str, seconds: float) -> None:
        """Time spent outside the stage list (storing the turn, which happens after the trace is final)."""
        self.metrics.stage_seconds.labels(stage=name).observe(seconds)

    def finish(self, trace: TurnTrace, calls: tuple[ModelCall, ...]) -> None:
        """Turn-level counts, once per answered turn."""
        metrics = self.metrics
        metrics.turns.inc()
        if trace.route:
            metrics.routes.labels(kind=trace.route).inc()
        for call in calls:
            metrics.model_calls.labels(purpose=call.purpose).inc()
            if call.cached_tokens:
                metrics.model_prompt_tokens.labels(purpose=call.purpose, cached="true").inc(call.cached_tokens)
            if call.evaluated_tokens:
                metrics.model_prompt_tokens.labels(purpose=call.purpose, cached="false").inc(call.evaluated_tokens)
        metrics.prompt_tokens.observe(trace.prompt_tokens)
        if trace.budget:
            metrics.budget_evictions.inc(trace.budget.turns_evicted_for_budget)
