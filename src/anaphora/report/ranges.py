"""The report's time range as people write it: an ISO date or date-time (UTC unless it says otherwise), Unix
seconds, or a span back from now (``7d``, ``24h``, ``30m``)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from anaphora.errors import InputError

DEFAULT_SPAN = "7d"
_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([dhm])")
_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0}


def _not_a_time(value: str, name: str) -> InputError:
    return InputError(
        f"{name} {value!r} is not a time (or not one between the years 1 and 9999)",
        hint="use a date (2026-12-01), a date-time (2026-12-01T09:30, UTC unless it has an offset), Unix "
        "seconds, or a span back from now (7d, 24h, 30m)",
        param=name,
    )


def _seconds(text: str, now: float) -> float | None:
    span = _SPAN.fullmatch(text)
    if span:
        return now - float(span.group(1)) * _SECONDS[span.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def parse_when(value: str, now: float, *, name: str) -> float:
    """Unix seconds for ``value``; an :class:`InputError` naming ``name`` and the accepted forms otherwise."""
    seconds = _seconds(value.strip(), now)
    if seconds is None or not math.isfinite(seconds):
        raise _not_a_time(value, name)
    try:  # every store can hold it (PostgreSQL's timestamps are datetimes)
        datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise _not_a_time(value, name) from None
    return seconds


def time_range(since: str | None, until: str | None, now: float) -> tuple[float, float]:
    """``[since, until)``; by default the last 7 days up to now. A range that ends before it starts is refused."""
    start = parse_when(since or DEFAULT_SPAN, now, name="since")
    end = parse_when(until, now, name="until") if until else now
    if end <= start:
        raise InputError(
            "the report's range ends before it starts (until <= since)",
            hint="give --since earlier than --until (or leave --until out: now)",
            param="until",
        )
    return start, end
