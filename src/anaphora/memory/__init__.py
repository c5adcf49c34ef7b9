"""Long-term memory across conversations, per user: episodes and facts with provenance, entities and a profile
(``types``), behind the :class:`MemoryStore` Protocol (``protocols``)."""

from anaphora.memory.protocols import MemoryReader, MemoryStore, MemoryWriter
from anaphora.memory.types import (
    Entity,
    EntityMention,
    MemoryExport,
    MemoryHit,
    MemoryItem,
    MemoryKind,
    MemoryPage,
    Profile,
    new_memory_id,
)

__all__ = [
    "Entity",
    "EntityMention",
    "MemoryExport",
    "MemoryHit",
    "MemoryItem",
    "MemoryKind",
    "MemoryPage",
    "MemoryReader",
    "MemoryStore",
    "MemoryWriter",
    "Profile",
    "new_memory_id",
]
