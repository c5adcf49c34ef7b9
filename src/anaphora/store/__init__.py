"""Stores: the SQLite database and the stores built on it, and the PostgreSQL conversation store, behind the
Protocols in ``protocols``."""

from anaphora.store.conversations import SQLiteConversationStore
from anaphora.store.corpus import SQLiteCorpus, StoredDocument
from anaphora.store.database import Database
from anaphora.store.embedding_cache import SQLiteEmbeddingCache
from anaphora.store.postgres import PostgresConversationStore
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
    "PostgresConversationStore",
    "SQLiteConversationStore",
    "SQLiteCorpus",
    "SQLiteEmbeddingCache",
    "StoredDocument",
    "StoredTurn",
    "Summary",
    "SummaryStore",
]
