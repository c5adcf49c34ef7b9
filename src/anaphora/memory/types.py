"""What long-term memory holds, per user: value objects shared by the stores, the writer and the recall stage.

Every item carries its provenance (the conversation and the turn indexes it came from, and the time of those
turns), so recall can say where a memory came from and erase can find everything of a user.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Literal

from anaphora.reading.extract import EntityKind

MemoryKind = Literal["episode", "fact"]


def new_memory_id() -> str:
    """A fresh item id; ids are global, but every store read still checks the owner."""
    return uuid.uuid4().hex[:16]


def epoch_key(user_id: str) -> str:
    """How a store keys a user's erase epoch: a hash, so the row an erase leaves names nobody."""
    return hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One remembered thing of ``user_id``.

    An *episode* is what was said in one or a few neighbouring turns (``turns``, in order) of a conversation. A
    *fact* is a short statement about the user ("uses k3s") with ``subject`` / ``attribute`` / ``value`` and the
    turns it was extracted from. ``time`` is when the (last) source turn happened. A fact is current while
    ``valid_to`` is ``None``; a newer fact with the same subject and attribute closes it (``valid_to`` = the newer
    one's ``valid_from``): superseded facts are kept, so "what did I use before?" can be answered.
    """

    id: str
    user_id: str
    kind: MemoryKind
    text: str
    conversation_id: str
    turns: tuple[int, ...]
    time: float
    subject: str = ""
    attribute: str = ""
    value: str = ""
    valid_from: float | None = None
    valid_to: float | None = None
    source: str = "rules"  # what wrote it: "turn" (episodes), "rules" or "model" (facts)

    @property
    def current(self) -> bool:
        return self.valid_to is None


@dataclass(frozen=True, slots=True)
class EntityMention:
    """A named thing seen in a turn: what :meth:`MemoryStore.upsert_entities` counts."""

    name: str
    kind: EntityKind
    seen_at: float


@dataclass(frozen=True, slots=True)
class Entity:
    """A named thing of the user's conversations (product, version, platform, person), keyed by ``key`` (its
    case-folded name), with how often and when it was last mentioned."""

    user_id: str
    key: str
    name: str
    kind: EntityKind
    mentions: int
    first_seen: float
    last_seen: float


@dataclass(frozen=True, slots=True)
class Profile:
    """The per-user summary rolled up from conversation summaries; ``covers`` names what it was built from."""

    user_id: str
    text: str
    updated_at: float
    covers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One search result: an item id and its score (larger is better; the scale depends on the search)."""

    item_id: str
    score: float


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of a user's items, newest first, and the offset of the next page (``None``: no more)."""

    items: tuple[MemoryItem, ...]
    next_offset: int | None


@dataclass(frozen=True, slots=True)
class MemoryExport:
    """Everything a store holds of one user (``anaphora memory export``; data portability)."""

    user_id: str
    items: tuple[MemoryItem, ...]
    entities: tuple[Entity, ...]
    profile: Profile | None
