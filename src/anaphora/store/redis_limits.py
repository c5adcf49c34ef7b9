"""Sliding-window counters in Redis, shared by every replica (public mode's limits on anonymous visitors).

Each window is a sorted set ``{prefix}{limits}:<key>`` of events scored by their time, expiring after the window.
One Lua script checks every window of an event and adds the event to all of them only when each has room, so two
replicas admitting at once cannot both take the last place. The ``{limits}`` hash tag keeps a call's keys in one
slot of a Redis Cluster.

Needs the ``redis`` extra: ``pip install 'anaphora[redis]'``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from anaphora.store.redis_store import DEFAULT_PREFIX, async_client, translating

# KEYS: the windows. ARGV[1]: now (s), ARGV[2]: the event's unique member, then each window's limit and seconds.
# Returns {0} when the event was added to every window, else {i, oldest}: window i (1-based) is full.
_ADMIT = """
local now = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local limit, seconds = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - seconds)
  if redis.call('ZCARD', key) >= limit then
    return {i, redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]}
  end
end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[2])
  redis.call('PEXPIRE', key, math.ceil(tonumber(ARGV[2 + 2 * i]) * 1000))
end
return {0}
"""


class RedisWindows:
    """``admit`` as :class:`anaphora.server.public_limits.MemoryWindows` has it, over Redis."""

    def __init__(self, url: str, *, key_prefix: str = DEFAULT_PREFIX, timeout_s: float = 2.0) -> None:
        self.client = async_client(url, timeout_s, purpose="public mode's shared limits")
        self.prefix = f"{key_prefix}{{limits}}:"
        self._admit: Any = None

    @translating
    async def admit(self, windows: Sequence[tuple[str, int, float]], now: float) -> tuple[int, float] | None:
        """Add one event to every ``(key, limit, seconds)`` window if each has room (None); else (the index of the
        first full window, the time of its oldest event)."""
        if self._admit is None:
            self._admit = self.client.register_script(_ADMIT)
        keys = [self.prefix + key for key, _, _ in windows]
        arguments: list[Any] = [repr(now), uuid.uuid4().hex]
        for _, limit, seconds in windows:
            arguments += [limit, repr(seconds)]
        found = await self._admit(keys=keys, args=arguments)
        if int(found[0]) == 0:
            return None
        return int(found[0]) - 1, float(found[1])

    async def aclose(self) -> None:
        await self.client.aclose()
