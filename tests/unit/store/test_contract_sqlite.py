"""The store contract (anaphora.testing.store_contract) run against SQLiteConversationStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from anaphora.store import Database, SQLiteConversationStore
from anaphora.testing.store_contract import ConversationStoreContract

pytestmark = pytest.mark.unit


class TestSQLiteConversationStoreContract(ConversationStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SQLiteConversationStore]:
        database = Database(tmp_path / "anaphora.db")
        yield SQLiteConversationStore(database)
        database.close()

    @asynccontextmanager
    async def failing_append(self, store: SQLiteConversationStore) -> AsyncIterator[None]:
        # the turn row is written first, then the conversation is touched: fail on the second write
        with store.db.transaction() as db:
            db.execute(
                "CREATE TRIGGER fail_touch BEFORE UPDATE ON conversations BEGIN SELECT RAISE(ABORT, 'boom'); END"
            )
        try:
            yield
        finally:
            with store.db.transaction() as db:
                db.execute("DROP TRIGGER fail_touch")
