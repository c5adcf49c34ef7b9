"""Timing and status bookkeeping for the stages of one turn."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from anaphora.types import StageRecord, StageStatus, TurnTrace


class StageTimer:
    """Yielded by :func:`timed`; the stage sets ``status`` and ``detail`` as it learns them."""

    def __init__(self, record: StageRecord) -> None:
        self.record = record

    def set(self, status: StageStatus, detail: str = "") -> None:
        self.record.status = status
        if detail:
            self.record.detail = detail


@contextmanager
def timed(trace: TurnTrace, name: str, tracer: Any | None = None) -> Iterator[StageTimer]:
    """Record a stage in the turn's trace, and as an OpenTelemetry span when a tracer is given."""
    record = StageRecord(name=name)
    trace.stages.append(record)
    span_context = tracer.start_as_current_span(f"anaphora.{name}") if tracer is not None else nullcontext()
    with span_context as span:
        started = time.perf_counter()
        try:
            yield StageTimer(record)
        finally:
            record.ms = (time.perf_counter() - started) * 1000
            if span is not None:
                span.set_attribute("anaphora.status", record.status)
                if record.detail:
                    span.set_attribute("anaphora.detail", record.detail)
