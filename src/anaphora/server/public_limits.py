"""Public mode's limits on anonymous visitors: questions per visitor per minute, questions (and new visitor
sessions) per site per minute, and questions of all visitors per UTC day. A refusal is a :class:`RateLimitError`
(HTTP 429) whose message says which limit was hit and whose ``Retry-After`` says when it lifts; a refused question
is not counted.

Every limit is a sliding window of events. Where the windows live follows the sessions (``session_store``): in
this process's memory (:class:`MemoryWindows`; with several workers each enforces the limits on its own share), or
in Redis (:class:`anaphora.store.redis_limits.RedisWindows`), shared by every replica.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol

from anaphora.errors import RateLimitError
from anaphora.settings import PublicSettings, Settings

MINUTE_S = 60.0
DAY_S = 86400.0
MAX_KEYS = 100_000  # windows kept in memory at once; the least recently used go first

Window = tuple[str, int, float]  # (key, at most this many events, in any this many seconds)


class Windows(Protocol):
    """Sliding windows of events, checked and counted together."""

    async def admit(self, windows: Sequence[Window], now: float) -> tuple[int, float] | None:
        """Add one event at ``now`` to every window if each has room (None); else (the index of the first full
        window, the time of its oldest event), and nothing is added."""
        ...

    async def aclose(self) -> None: ...


class MemoryWindows:
    """:class:`Windows` in this process's memory."""

    def __init__(self) -> None:
        self._events: dict[str, deque[float]] = {}

    async def admit(self, windows: Sequence[Window], now: float) -> tuple[int, float] | None:
        for index, (key, limit, seconds) in enumerate(windows):
            events = self._events.get(key) or deque()
            while events and events[0] <= now - seconds:
                events.popleft()
            if len(events) >= limit:
                return index, events[0]
        for key, _, _ in windows:
            events = self._events.pop(key, None) or deque()
            events.append(now)
            self._events[key] = events  # the most recently used last
        while len(self._events) > MAX_KEYS:
            del self._events[next(iter(self._events))]
        return None

    async def aclose(self) -> None:
        self._events.clear()


def build_windows(settings: Settings) -> Windows:
    """Shared in Redis when sessions are (several replicas) and public mode is on, else in memory."""
    if settings.public.public_mode and settings.server.session_store == "redis":
        from anaphora.app import server_url
        from anaphora.store.redis_limits import RedisWindows

        url = server_url(settings.stores, "session_store", "redis", "memory")
        return RedisWindows(url, key_prefix=settings.stores.redis_key_prefix)
    return MemoryWindows()


def until_midnight_s(now: float) -> float:
    moment = datetime.fromtimestamp(now, UTC)
    midnight = datetime.combine(moment.date() + timedelta(days=1), datetime.min.time(), UTC)
    return (midnight - moment).total_seconds()


class PublicLimits:
    """Admits a visitor's question, or a new visitor session of a site, or refuses it with the reason."""

    def __init__(
        self, settings: PublicSettings, windows: Windows | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self.windows = windows if windows is not None else MemoryWindows()
        self.clock = clock

    async def admit_turn(self, visitor_id: str, site: str) -> None:
        """Count one question of ``visitor_id`` on ``site``, or raise :class:`RateLimitError` (nothing counted)."""
        now, public = self.clock(), self.settings
        day = datetime.fromtimestamp(now, UTC).date().isoformat()
        windows = [
            (f"day:{day}", public.public_daily_turns, DAY_S),  # a key per UTC day: it holds that day's questions
            (f"site:{site}", public.site_turns_per_minute, MINUTE_S),
            (f"visitor:{visitor_id}", public.visitor_turns_per_minute, MINUTE_S),
        ]
        full = await self.windows.admit(windows, now)
        if full is None:
            return
        index, oldest = full
        wait = oldest + MINUTE_S - now
        if index == 0:
            raise refusal(
                "daily_cap_reached",
                f"the assistant has answered its {public.public_daily_turns} public questions for today",
                "the daily cap resets at 00:00 UTC; the site's operator can raise public_daily_turns",
                until_midnight_s(now),
            )
        if index == 1:
            raise refusal(
                "site_rate_limit",
                f"too many questions from the visitors of {site} right now (at most {public.site_turns_per_minute} "
                "a minute)",
                "try again in a minute",
                wait,
            )
        raise refusal(
            "visitor_rate_limit",
            f"you have asked {public.visitor_turns_per_minute} questions in the last minute, the most allowed",
            f"wait {max(1, round(wait))} s before the next question",
            wait,
        )

    async def admit_session(self, site: str) -> None:
        """Count one new visitor session of ``site``, or raise :class:`RateLimitError`."""
        now, limit = self.clock(), self.settings.site_turns_per_minute
        full = await self.windows.admit([(f"sessions:{site}", limit, MINUTE_S)], now)
        if full is not None:
            raise refusal(
                "site_rate_limit",
                f"too many new visitor sessions for {site} right now (at most {limit} a minute)",
                "try again in a minute",
                full[1] + MINUTE_S - now,
            )

    async def aclose(self) -> None:
        await self.windows.aclose()


def refusal(code: str, message: str, hint: str, wait_s: float) -> RateLimitError:
    """A limit reached: a 429 that says which one, and when it lifts."""
    return RateLimitError(message, hint=hint, retry_after_s=max(wait_s, 1.0), code=code)
