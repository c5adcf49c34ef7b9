"""Moved to :mod:`anaphora.memory.postgres_store`, beside the SQLite memory store; this name keeps old imports
working."""

from anaphora.memory.postgres_store import MIGRATIONS, TABLES, PostgresMemoryStore

__all__ = ["MIGRATIONS", "TABLES", "PostgresMemoryStore"]
