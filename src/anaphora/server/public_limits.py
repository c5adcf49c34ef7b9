"""Public mode's limits on anonymous visitors: questions per visitor per minute, questions (and new visitor
sessions) per site per minute, and questions of all visitors per UTC day. A refusal is a :class:`RateLimitError`
(HTTP 429) whose message says which limit was hit and whose ``Retry-After`` says when it lifts.

The counts are kept in this process: with several replicas or workers, each one enforces the limits on its own
share of the traffic (so the totals are at most that many times the settings).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from anaphora.errors import RateLimitError
from anaphora.settings import PublicSettings

WINDOW_S = 60.0
MAX_KEYS = 100_000  # visitors tracked at once; the idle ones are dropped first


class SlidingWindow:
    """At most ``limit`` events per key in any ``window_s`` seconds."""

    def __init__(self, limit: int, window_s: float = WINDOW_S) -> None:
        self.limit = limit
        self.window_s = window_s
        self._events: dict[str, deque[float]] = {}

    def wait_s(self, key: str, now: float) -> float:
        """0 when one more event fits now, else the seconds until one does."""
        events = self._events.get(key)
        if events is None:
            return 0.0
        while events and events[0] <= now - self.window_s:
            events.popleft()
        return 0.0 if len(events) < self.limit else events[0] + self.window_s - now

    def add(self, key: str, now: float) -> None:
        events = self._events.pop(key, None) or deque()
        events.append(now)
        self._events[key] = events  # the most recently used last
        while len(self._events) > MAX_KEYS:
            del self._events[next(iter(self._events))]


class DailyCap:
    """At most ``limit`` events per UTC day."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.day = ""
        self.count = 0

    def wait_s(self, now: float) -> float:
        moment = datetime.fromtimestamp(now, UTC)
        if moment.date().isoformat() != self.day:
            self.day, self.count = moment.date().isoformat(), 0
        if self.count < self.limit:
            return 0.0
        midnight = datetime.combine(moment.date() + timedelta(days=1), datetime.min.time(), UTC)
        return (midnight - moment).total_seconds()

    def add(self) -> None:
        self.count += 1


class PublicLimits:
    """Admits a visitor's question, or a new visitor session of a site, or refuses it with the reason."""

    def __init__(self, settings: PublicSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self.visitors = SlidingWindow(settings.visitor_turns_per_minute)
        self.sites = SlidingWindow(settings.site_turns_per_minute)
        self.sessions = SlidingWindow(settings.site_turns_per_minute)
        self.daily = DailyCap(settings.public_daily_turns)

    def admit_turn(self, visitor_id: str, site: str) -> None:
        """Count one question of ``visitor_id`` on ``site``, or raise :class:`RateLimitError` (nothing counted)."""
        now, public = self.clock(), self.settings
        refuse_if(
            self.daily.wait_s(now),
            "daily_cap_reached",
            f"the assistant has answered its {public.public_daily_turns} public questions for today",
            "the daily cap resets at 00:00 UTC; the site's operator can raise public_daily_turns",
        )
        refuse_if(
            self.sites.wait_s(site, now),
            "site_rate_limit",
            f"too many questions from the visitors of {site} right now (at most {public.site_turns_per_minute} a "
            "minute)",
            "try again in a minute",
        )
        wait = self.visitors.wait_s(visitor_id, now)
        refuse_if(
            wait,
            "visitor_rate_limit",
            f"you have asked {public.visitor_turns_per_minute} questions in the last minute, the most allowed",
            f"wait {max(1, round(wait))} s before the next question",
        )
        self.daily.add()
        self.sites.add(site, now)
        self.visitors.add(visitor_id, now)

    def admit_session(self, site: str) -> None:
        """Count one new visitor session of ``site``, or raise :class:`RateLimitError`."""
        now = self.clock()
        refuse_if(
            self.sessions.wait_s(site, now),
            "site_rate_limit",
            f"too many new visitor sessions for {site} right now (at most {self.settings.site_turns_per_minute} a "
            "minute)",
            "try again in a minute",
        )
        self.sessions.add(site, now)


def refuse_if(wait_s: float, code: str, message: str, hint: str) -> None:
    """A limit reached (``wait_s`` > 0) is a 429 that says which one, and when it lifts."""
    if wait_s > 0:
        raise RateLimitError(message, hint=hint, retry_after_s=wait_s, code=code)
