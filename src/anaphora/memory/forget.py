"""Forgetting one memory the way a user means it: a forgotten fact is in no later prompt.

A fact's words are also in the episode of the turn that stated it (the user's message), and in the profile that
every later prompt carries; so forgetting a fact forgets that episode too and rolls the profile up again from the
facts left. Forgetting an episode forgets only it (the facts it gave stay, each forgettable on its own).
"""

from __future__ import annotations

from anaphora.errors import MemoryNotFoundError
from anaphora.memory.protocols import MemoryStore
from anaphora.memory.types import MemoryItem
from anaphora.memory.writer import rebuild_profile

PAGE = 200


async def source_episodes(store: MemoryStore, user_id: str, fact: MemoryItem) -> list[MemoryItem]:
    """The episodes of the turns a fact was stated in (same conversation, a shared turn, said at its time): the
    user's items are listed newest first, so the search stops at the first page older than the fact."""
    found: list[MemoryItem] = []
    offset: int | None = 0
    while offset is not None:
        page = await store.list(user_id, kind="episode", limit=PAGE, offset=offset)
        found += [
            e
            for e in page.items
            if e.conversation_id == fact.conversation_id and set(e.turns) & set(fact.turns) and e.time == fact.time
        ]
        if not page.items or page.items[-1].time < fact.time:
            break
        offset = page.next_offset
    return found


async def forget(store: MemoryStore, user_id: str, item_id: str) -> list[str]:
    """Forget the user's item ``item_id`` (a fact with its source episode, and the profile rebuilt); the ids
    forgotten. :class:`~anaphora.errors.MemoryNotFoundError` if the user has no such item (an id holding NUL names
    none on any store, and PostgreSQL cannot even compare it)."""
    if "\x00" in item_id or "\x00" in user_id:
        raise MemoryNotFoundError(item_id)
    item = (await store.get_many(user_id, [item_id])).get(item_id)
    if item is None:
        raise MemoryNotFoundError(item_id)
    await store.delete(user_id, item_id)
    forgotten = [item_id]
    if item.kind == "fact":
        for episode in await source_episodes(store, user_id, item):
            try:
                await store.delete(user_id, episode.id)
            except MemoryNotFoundError:  # forgotten meanwhile
                continue
            forgotten.append(episode.id)
        await rebuild_profile(store, user_id)
    return forgotten
