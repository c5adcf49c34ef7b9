"""The long-term memory store interface, split by who needs what: the recall stage reads (:class:`MemoryReader`),
the background writer writes (:class:`MemoryWriter`), the API, CLI and erase use the whole :class:`MemoryStore`.

Rules every backend keeps (``anaphora.testing.memory_contract`` checks them):

- **Isolation**: every method takes ``user_id`` and filters by it *inside the store query itself*; an id owned by
  another user is reported as missing (:class:`~anaphora.errors.MemoryNotFoundError`) or left out of a result,
  never revealed. Search statistics (BM25's document frequencies) are the user's own.
- **Supersede, don't delete**: adding a fact closes every current fact of the same user, subject and attribute
  with another value (``valid_to`` = the new fact's ``valid_from``); a fact equal to a current one (same subject,
  attribute and value) is not stored twice. Only ``delete``, ``delete_expired`` and ``erase_user`` remove rows.
- **Atomic writes**: one ``add`` (items with their vectors, and the facts it closes) is one transaction.
- **Erase wins**: ``erase_user`` moves the user's *epoch* forward in its own transaction. A write given the epoch
  it started under (``epoch=``) checks it inside its transaction and is dropped when an erase came in between, so
  a background write still in flight (on this replica or another) cannot bring erased memories back. The epoch
  is kept under a hash of the user id (no id, nothing said), the only row an erase leaves.
- Searches return at most ``k`` hits per query, best first, in query order; an empty query, a query with no known
  word, or a user with no items gets an empty list, never an error. Dense scores are cosine similarities.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from anaphora.memory.types import (
    Entity,
    EntityMention,
    MemoryExport,
    MemoryHit,
    MemoryItem,
    MemoryKind,
    MemoryPage,
    Profile,
)


class MemoryReader(Protocol):
    """What recall needs: lexical and dense search over one user's items, and the items by id."""

    async def lexical(self, user_id: str, queries: Sequence[str], k: int) -> list[list[MemoryHit]]:
        """BM25 over the user's items (the user's own document frequencies), one ranking per query."""
        ...

    async def dense(self, user_id: str, vectors: np.ndarray, k: int) -> list[list[MemoryHit]]:
        """Cosine top-``k`` of the user's item vectors, one ranking per row of ``vectors``; a dimension other than
        the stored vectors' is a :class:`~anaphora.errors.ConfigurationError` (the embedder changed)."""
        ...

    async def get_many(self, user_id: str, item_ids: Sequence[str]) -> dict[str, MemoryItem]:
        """The user's items with these ids; unknown ids and other users' items are left out."""
        ...

    async def profile(self, user_id: str) -> Profile | None: ...


class MemoryWriter(Protocol):
    """What the background writer needs. ``epoch``: the user's epoch when the turn began (:meth:`epoch`); a write
    under an older one is dropped (``None``: not checked, for scripts that write directly)."""

    async def epoch(self, user_id: str) -> int:
        """How many times the user's memory was erased (0 at first): what a write started now passes back."""
        ...

    async def add(
        self, user_id: str, items: Sequence[MemoryItem], vectors: np.ndarray | None = None, *, epoch: int | None = None
    ) -> list[MemoryItem]:
        """Store ``items`` (all of ``user_id``; ``vectors[i]`` is item i's, L2-normalised, or ``None`` for no
        vectors), superseding older facts as the module's rules say. Returns the items actually stored (duplicate
        current facts left out; nothing when ``epoch`` is stale). An item of another user is a ``ValueError``."""
        ...

    async def upsert_entities(
        self, user_id: str, mentions: Sequence[EntityMention], *, epoch: int | None = None
    ) -> None:
        """Count each mention of an entity (by case-folded name) and move its ``last_seen`` forward."""
        ...

    async def set_profile(
        self, user_id: str, text: str, covers: Sequence[str] = (), *, epoch: int | None = None
    ) -> None: ...


class MemoryStore(MemoryReader, MemoryWriter, Protocol):
    """A user's long-term memory: items (episodes and facts, with vectors), entities and a profile."""

    async def open(self) -> None:
        """Connect and bring the schema up to date (a networked store); safe to call more than once."""
        ...

    async def ping(self) -> None:
        """Raise unless the store answers (the readiness check)."""
        ...

    async def aclose(self) -> None: ...

    async def list(
        self, user_id: str, *, kind: MemoryKind | None = None, limit: int = 50, offset: int = 0
    ) -> MemoryPage:
        """The user's items, newest (``time``) first, then by id; ``kind`` filters episodes or facts."""
        ...

    async def entities(self, user_id: str, *, limit: int = 100) -> list[Entity]:
        """The user's entities, most mentioned first, then most recently seen."""
        ...

    async def delete(self, user_id: str, item_id: str) -> None:
        """Forget one item (with its vector); :class:`~anaphora.errors.MemoryNotFoundError` if the user has no
        item with this id."""
        ...

    async def delete_expired(self, before_ts: float) -> dict[str, int]:
        """Memory TTL: delete every item whose ``time`` is strictly before ``before_ts`` (with its vector), and
        entities last seen before it, for all users. Returns the counts as :meth:`erase_user`."""
        ...

    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Right to erase: delete all of the user's rows in every memory table and move the user's epoch forward,
        atomically. Returns
        ``{"memories": n, "vectors": n, "entities": n, "profiles": n}``."""
        ...

    async def export(self, user_id: str) -> MemoryExport:
        """Everything held of the user: items (newest first), entities and profile."""
        ...
