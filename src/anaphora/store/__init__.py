"""Stores: the SQLite database and the stores built on it, behind the Protocols in ``protocols``."""

from anaphora.store.conversations import SQLiteConversationStore
from anaphora.store.corpus import SQLiteCorpus, StoredDocument
from anaphora.store.database import Database
from anaphora.store.embedding_cache import SQLiteEmbeddingCache
from anaphora.store.protocols import (
    Conversation,
    ConversationStore,
    EmbeddingCache,
    StoredTurn,
    Summary,
    SummaryStore,
)

__all__ = [
    "Conversation",
    "ConversationStore",
    "Database",
    "EmbeddingCache",
    "SQLiteConversationStore",
    "SQLiteCorpus",
    "SQLiteEmbeddingCache",
    "StoredDocument",
    "StoredTurn",
    "Summary",
    "SummaryStore",
]
