"""The memory contract (anaphora.testing.memory_contract) run against SQLiteMemoryStore."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from anaphora.memory.sqlite_store import SQLiteMemoryStore
from anaphora.store import Database
from anaphora.testing.memory_contract import ALICE, ALICE_TEXTS, EMBEDDER, MemoryStoreContract, add_texts

pytestmark = pytest.mark.unit
TABLES = ("memory_items", "memory_vectors", "memory_entities", "memory_profiles", "memory_users")


class TestSQLiteMemoryStoreContract(MemoryStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SQLiteMemoryStore]:
        database = Database(tmp_path / "anaphora.db")
        yield SQLiteMemoryStore(database)
        database.close()

    async def rows_of(self, store: SQLiteMemoryStore, user_id: str) -> dict[str, int]:
        return {t: store.db.query(f"SELECT COUNT(*) FROM {t} WHERE user_id = ?", (user_id,))[0][0] for t in TABLES}


async def test_a_second_process_on_the_same_file_sees_every_change(tmp_path: Path) -> None:
    """The per-user index is a cache of the tables: another store on the same file adds and deletes behind it."""
    first_db, second_db = Database(tmp_path / "a.db"), Database(tmp_path / "a.db")
    first, second = SQLiteMemoryStore(first_db), SQLiteMemoryStore(second_db)
    try:
        ids = await add_texts(first, ALICE, ALICE_TEXTS)
        assert (await second.lexical(ALICE, ["volcano"], 5))[0][0].item_id == ids[2]
        (late,) = await add_texts(first, ALICE, ["Alice: a zeppelin over the volcano"], start=5000.0)
        assert {h.item_id for h in (await second.lexical(ALICE, ["volcano"], 5))[0]} == {ids[2], late}
        await first.delete(ALICE, ids[2])
        assert [h.item_id for h in (await second.lexical(ALICE, ["volcano"], 5))[0]] == [late]
        dense = (await second.dense(ALICE, EMBEDDER.embed(["volcano trail dog"]), 9))[0]
        assert {h.item_id for h in dense} == {ids[0], ids[1], late}
        await first.erase_user(ALICE)  # then as many writes as before: the second's index must still rebuild
        again = await add_texts(first, ALICE, ["Alice: volcano again"] * 4, start=9000.0)
        assert {h.item_id for h in (await second.lexical(ALICE, ["volcano"], 9))[0]} == set(again)
    finally:
        first_db.close()
        second_db.close()
