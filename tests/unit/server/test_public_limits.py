"""Public mode's limits (per visitor, per site, per UTC day) on each place their windows can live: the contract
below, run here in memory and in tests/integration/test_public_limits_redis.py on Redis."""

from __future__ import annotations

import pytest

from anaphora.errors import RateLimitError
from anaphora.server.public_limits import MemoryWindows, PublicLimits
from anaphora.settings import PublicSettings

SITE = "https://docs.example.com"
OTHER_SITE = "https://blog.example.com"
START = 1_000_000.0  # 1970-01-12 13:46:40 UTC


class PublicLimitsContract:
    """Subclasses provide the ``windows`` fixture (a fresh, empty :class:`Windows`)."""

    def limits(self, windows, now: list[float]) -> PublicLimits:
        settings = PublicSettings(visitor_turns_per_minute=2, site_turns_per_minute=3, public_daily_turns=5)
        return PublicLimits(settings, windows, clock=lambda: now[0])

    async def test_each_limit_answers_429_with_its_reason_and_counts_nothing_refused(self, windows) -> None:
        now = [START]
        limits = self.limits(windows, now)
        await limits.admit_turn("visitor:a", SITE)
        now[0] += 10
        await limits.admit_turn("visitor:a", SITE)
        with pytest.raises(RateLimitError, match="2 questions in the last minute") as hit:
            await limits.admit_turn("visitor:a", SITE)
        assert hit.value.code == "visitor_rate_limit" and hit.value.retry_after_s == pytest.approx(50)
        await limits.admit_turn("visitor:b", SITE)  # the refused question took no place of the site's three
        with pytest.raises(RateLimitError, match=f"too many questions from the visitors of {SITE}") as site:
            await limits.admit_turn("visitor:c", SITE)
        assert site.value.code == "site_rate_limit"
        await limits.admit_turn("visitor:c", OTHER_SITE)  # another site has its own budget
        now[0] += 61
        await limits.admit_turn("visitor:a", SITE)  # a minute later: room again
        with pytest.raises(RateLimitError, match="its 5 public questions for today") as daily:
            await limits.admit_turn("visitor:d", OTHER_SITE)
        assert daily.value.code == "daily_cap_reached" and "00:00 UTC" in daily.value.hint
        assert daily.value.retry_after_s == pytest.approx(86400 - (START + 71) % 86400)  # until midnight UTC
        now[0] += 86400
        await limits.admit_turn("visitor:d", OTHER_SITE)  # a new UTC day

    async def test_new_visitor_sessions_are_limited_per_site(self, windows) -> None:
        now = [START]
        limits = self.limits(windows, now)
        for _ in range(3):
            await limits.admit_session(SITE)
        with pytest.raises(RateLimitError, match=f"too many new visitor sessions for {SITE}") as hit:
            await limits.admit_session(SITE)
        assert hit.value.code == "site_rate_limit"
        await limits.admit_session(OTHER_SITE)
        await limits.admit_turn("visitor:a", SITE)  # sessions and questions are counted apart


class TestMemoryWindows(PublicLimitsContract):
    @pytest.fixture
    def windows(self) -> MemoryWindows:
        return MemoryWindows()
