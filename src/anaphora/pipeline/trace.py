"""Timing and status bookkeeping for the stages of one turn."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

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
def timed(trace: TurnTrace, name: str) -> Iterator[StageTimer]:
    record = StageRecord(name=name)
    trace.stages.append(record)
    started = time.perf_counter()
    try:
        yield StageTimer(record)
    finally:
        record.ms = (time.perf_counter() - started) * 1000
