"""Public mode's limits with their windows in Redis, shared by every replica: the same contract as in memory."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.unit.server.test_public_limits import PublicLimitsContract

pytestmark = pytest.mark.integration

pytest.importorskip("redis", reason="the redis extra is not installed")

from anaphora.server.public_limits import MemoryWindows, build_windows  # noqa: E402
from anaphora.settings import Settings  # noqa: E402
from anaphora.store.redis_limits import RedisWindows  # noqa: E402
from tests.integration.conftest import REDIS_URL, own_keys  # noqa: E402


class TestRedisWindows(PublicLimitsContract):
    @pytest.fixture
    async def windows(self, prefix: str) -> AsyncIterator[RedisWindows]:
        windows = RedisWindows(REDIS_URL, key_prefix=prefix)
        yield windows
        await windows.aclose()

    async def test_the_windows_are_keys_that_expire(self, windows, prefix: str, sync_redis) -> None:
        assert await windows.admit([("site:x", 2, 60.0), ("visitor:y", 1, 60.0)], 1_000_000.0) is None
        keys = sorted(key.decode() for key in own_keys(sync_redis, prefix))
        assert keys == [f"{prefix}{{limits}}:site:x", f"{prefix}{{limits}}:visitor:y"]
        assert all(0 < sync_redis.pttl(key) <= 60_000 for key in keys)
        assert await windows.admit([("site:x", 2, 60.0), ("visitor:y", 1, 60.0)], 1_000_001.0) == (1, 1_000_000.0)
        assert sync_redis.zcard(keys[0]) == 1  # the refused event was added nowhere


async def test_replicas_share_the_windows_when_they_share_sessions(tmp_path) -> None:
    shared = Settings(data_dir=tmp_path, public_mode=True, session_store="redis", redis_url=REDIS_URL)
    windows = build_windows(shared)
    assert isinstance(windows, RedisWindows)
    await windows.aclose()
    assert isinstance(build_windows(shared.with_updates(public_mode=False)), MemoryWindows)
    assert isinstance(build_windows(Settings(data_dir=tmp_path, public_mode=True)), MemoryWindows)
