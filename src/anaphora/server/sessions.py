"""Server-side sessions in this process's memory (:class:`MemorySessionStore`), and the response header naming them.

A session is what the service holds for a user between requests: when it started and when the user was last seen
(the user's turns in flight, which occupy the concurrency slots, are counted by
:class:`anaphora.server.turns.TurnRunner`). It is independent of the token: a valid token after ``session_ttl_s``
of inactivity starts a fresh session. Nothing persisted belongs to a session: conversations live in the store, so
expiry, eviction and logout lose none of them. Replicas share sessions through
:class:`anaphora.store.redis_coordination.RedisSessionStore` instead (``session_store = "redis"``).

In memory, at most ``max_live`` sessions are kept (least recently seen evicted first). A session with a turn in
flight is never expired or evicted, so ``GET /v1/session`` keeps naming the session the turn started in; when every
live session is busy, the ceiling is exceeded until one finishes.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Callable

from starlette.datastructures import MutableHeaders
from starlette.types import Message, Scope

from anaphora.server.asgi import ExchangeObserver
from anaphora.store.protocols import Session

SESSION_HEADER = "X-Anaphora-Session"
STATE_KEY = "anaphora_session"  # in the ASGI scope's state: the id the response header carries


class MemorySessionStore:
    def __init__(
        self,
        *,
        ttl_s: float,
        max_live: int,
        busy: Callable[[str], bool] = lambda user_id: False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_live = max_live
        self.busy = busy
        self.clock = clock
        self._live: OrderedDict[str, Session] = OrderedDict()  # least recently seen first
        self.expired = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._live)

    async def touch(self, user_id: str) -> Session:
        """The user's session, seen now: the live one, or a fresh one if there is none or it expired."""
        now = self.clock()
        session = self._live.get(user_id)
        if session is not None and now - session.last_seen > self.ttl_s and not self.busy(user_id):
            del self._live[user_id]
            self.expired += 1
            session = None
        if session is None:
            session = self._live[user_id] = Session(uuid.uuid4().hex[:16], user_id, now, now)
            self._evict()
        session.last_seen = now
        self._live.move_to_end(user_id)
        return Session(session.id, user_id, session.started_at, session.last_seen)  # a copy, as Redis returns

    async def logout(self, user_id: str) -> Session | None:
        """Forget the user's session; the next request starts a fresh one."""
        return self._live.pop(user_id, None)

    async def aclose(self) -> None:
        self._live.clear()

    def _evict(self) -> None:
        if len(self._live) <= self.max_live:
            return
        for user_id in list(self._live)[:-1]:  # never the session just touched
            if len(self._live) <= self.max_live:
                return
            if not self.busy(user_id):
                del self._live[user_id]
                self.evicted += 1


class SessionHeaderMiddleware(ExchangeObserver):
    """Adds ``X-Anaphora-Session: <id>`` to the response of every request that touched a session."""

    def begin(self, scope: Scope) -> dict:
        return scope.setdefault("state", {})

    def response_started(self, scope: Scope, message: Message, context: dict) -> None:
        if context.get(STATE_KEY):
            MutableHeaders(scope=message)[SESSION_HEADER] = context[STATE_KEY]
