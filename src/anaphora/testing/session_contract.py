"""The contract every :class:`~anaphora.store.protocols.SessionStore` must honour, as a pytest suite to subclass.

A backend's test module subclasses :class:`SessionStoreContract` and provides two things: a ``make_sessions``
fixture, a factory ``make_sessions(ttl_s) -> SessionStore`` of empty stores that it closes afterwards, and
:meth:`SessionStoreContract.idle`, which lets ``seconds`` of inactivity pass (by advancing the store's clock, or
by sleeping for a store whose clock is the server's)::

    class TestMySessions(SessionStoreContract):
        @pytest.fixture
        async def make_sessions(self):
            made = []
            def make(ttl_s):
                made.append(MySessions(ttl_s=ttl_s))
                return made[-1]
            yield make
            for store in made:
                await store.aclose()

        async def idle(self, store, seconds):
            await asyncio.sleep(seconds)

Expiry is checked with TTLs of a few seconds and margins of a second or more, so a loaded machine does not make
it flaky.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from anaphora.store.protocols import SessionStore

TTL_S = 3.0


class SessionStoreContract:
    @pytest.fixture
    def make_sessions(self) -> Callable[..., SessionStore]:  # pragma: no cover - overridden
        raise NotImplementedError("a SessionStoreContract subclass must provide a `make_sessions` fixture")

    async def idle(self, store: SessionStore, seconds: float) -> None:  # pragma: no cover - overridden
        raise NotImplementedError("a SessionStoreContract subclass must say how inactivity passes")

    async def test_touch_starts_then_keeps_one_session(self, make_sessions) -> None:
        store = make_sessions(TTL_S)
        first = await store.touch("alice")
        assert first.user_id == "alice" and first.id and first.started_at == first.last_seen
        again = await store.touch("alice")
        assert (again.id, again.started_at) == (first.id, first.started_at)
        assert again.last_seen >= first.last_seen
        assert store.ttl_s == TTL_S

    async def test_users_have_separate_sessions(self, make_sessions) -> None:
        store = make_sessions(TTL_S)
        alice, bob = await store.touch("alice"), await store.touch("bob")
        assert alice.id != bob.id and bob.user_id == "bob"

    async def test_activity_inside_the_ttl_keeps_it_alive(self, make_sessions) -> None:
        store = make_sessions(TTL_S)
        session = await store.touch("alice")
        for _ in range(4):  # 4 s in all, longer than the TTL, but never 3 s without a touch
            await self.idle(store, 1.0)
            assert (await store.touch("alice")).id == session.id

    async def test_inactivity_past_the_ttl_starts_a_fresh_session(self, make_sessions) -> None:
        store = make_sessions(1.0)
        old = await store.touch("alice")
        await self.idle(store, 2.5)
        fresh = await store.touch("alice")
        assert fresh.id != old.id and fresh.started_at > old.last_seen

    async def test_logout_ends_the_session(self, make_sessions) -> None:
        store = make_sessions(TTL_S)
        assert await store.logout("alice") is None
        session = await store.touch("alice")
        ended = await store.logout("alice")
        assert ended is not None and (ended.id, ended.user_id) == (session.id, "alice")
        assert await store.logout("alice") is None
        assert (await store.touch("alice")).id != session.id

    async def test_concurrent_touches_agree_on_one_session(self, make_sessions) -> None:
        store = make_sessions(TTL_S)
        touched = await asyncio.gather(*(store.touch("carol") for _ in range(12)))
        assert len({s.id for s in touched}) == 1
