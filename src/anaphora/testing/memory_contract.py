"""The contract every memory-store backend must honour, as a pytest suite to subclass.

Like :mod:`anaphora.testing.store_contract`: a backend's test module subclasses :class:`MemoryStoreContract`,
provides a ``store`` fixture that yields an *empty*, ready :class:`~anaphora.memory.MemoryStore`, and overrides
:meth:`MemoryStoreContract.rows_of` to count the rows a user has in each of the backend's memory tables (the erase
test checks that none is left)::

    import pytest
    from anaphora.testing.memory_contract import MemoryStoreContract

    class TestMyMemoryStore(MemoryStoreContract):
        @pytest.fixture
        async def store(self):
            store = MyMemoryStore(...)
            await store.open()
            yield store
            await store.aclose()

        async def rows_of(self, store, user_id):
            return {"memory_items": ..., "memory_vectors": ..., ...}

Vectors come from the ``hashing`` embedder (384 dimensions, no model), so dense orderings are lexical and known.
The tests are ``async`` (pytest-asyncio, ``asyncio_mode = "auto"``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.errors import ConfigurationError, MemoryNotFoundError
from anaphora.memory.protocols import MemoryStore
from anaphora.memory.types import EntityMention, MemoryItem, new_memory_id

ALICE, BOB = "alice", "bob"
EMBEDDER = HashingEmbedder(384)
ALICE_TEXTS = (
    "Alice: I run k3s on a Raspberry Pi 4 cluster at home.",
    "Alice: my Helm chart version is 2.3.1 for the kestrel release.",
    "Alice: we hiked the volcano trail last summer with the dog.",
)
BOB_TEXTS = (
    "Bob: I run nomad on an Intel NUC in the garage.",
    "Bob: my Helm chart version is 9.9.9 for the falcon release.",
)


def episode(user_id: str, text: str, *, conversation: str = "c1", turn: int = 0, time: float = 1000.0) -> MemoryItem:
    return MemoryItem(
        id=new_memory_id(),
        user_id=user_id,
        kind="episode",
        text=text,
        conversation_id=conversation,
        turns=(turn,),
        time=time,
        source="turn",
    )


def fact(
    user_id: str, attribute: str, value: str, *, time: float = 1000.0, subject: str = "user", turn: int = 0
) -> MemoryItem:
    return MemoryItem(
        id=new_memory_id(),
        user_id=user_id,
        kind="fact",
        text=f"{subject} {attribute} {value}",
        conversation_id="c1",
        turns=(turn,),
        time=time,
        subject=subject,
        attribute=attribute,
        value=value,
        valid_from=time,
    )


async def add_texts(store: MemoryStore, user_id: str, texts: Sequence[str], *, start: float = 1000.0) -> list[str]:
    items = [episode(user_id, t, turn=i, time=start + i) for i, t in enumerate(texts)]
    await store.add(user_id, items, EMBEDDER.embed([i.text for i in items]))
    return [i.id for i in items]


class MemoryStoreContract:
    """Subclass, provide a ``store`` fixture (an empty store) and :meth:`rows_of`; every test must pass unchanged."""

    @pytest.fixture
    def store(self) -> MemoryStore:  # pragma: no cover - overridden
        raise NotImplementedError("a MemoryStoreContract subclass must provide a `store` fixture")

    async def rows_of(self, store: MemoryStore, user_id: str) -> dict[str, int]:  # pragma: no cover - overridden
        """Rows of ``user_id`` in each memory table of the backend, counted directly (not through the Protocol)."""
        raise NotImplementedError("a MemoryStoreContract subclass must count a user's rows per table")

    async def _fill(self, store: MemoryStore) -> tuple[list[str], list[str]]:
        alice = await add_texts(store, ALICE, ALICE_TEXTS)
        bob = await add_texts(store, BOB, BOB_TEXTS)
        for user in (ALICE, BOB):
            await store.add(user, [fact(user, "uses", "k3s" if user == ALICE else "nomad")])
            await store.upsert_entities(user, [EntityMention("Helm", "product", 1000.0)])
            await store.set_profile(user, f"{user} runs a home cluster")
        return alice, bob

    # --- lifecycle -------------------------------------------------------------------------------------------

    async def test_lifecycle_methods_answer(self, store):
        await store.open()  # safe to call again
        await store.ping()

    # --- writes and reads ------------------------------------------------------------------------------------

    async def test_items_round_trip_with_provenance(self, store):
        item = MemoryItem(
            id=new_memory_id(),
            user_id=ALICE,
            kind="episode",
            text="Alice: I upgraded to kestrel 2.4 — ünïcode too.",
            conversation_id="conv-7",
            turns=(3, 4),
            time=1234.5,
            source="turn",
        )
        stored = await store.add(ALICE, [item], EMBEDDER.embed([item.text]))
        assert stored == [item]
        assert (await store.get_many(ALICE, [item.id])) == {item.id: item}

    async def test_items_without_vectors_are_found_lexically_not_densely(self, store):
        item = episode(ALICE, "Alice: the zeppelin floated over the harbour")
        await store.add(ALICE, [item])
        assert [h.item_id for h in (await store.lexical(ALICE, ["zeppelin"], 5))[0]] == [item.id]
        assert (await store.dense(ALICE, EMBEDDER.embed(["zeppelin harbour"]), 5)) == [[]]

    async def test_an_item_of_another_user_is_refused(self, store):
        with pytest.raises(ValueError):
            await store.add(ALICE, [episode(BOB, "Bob: sneaky")])
        assert (await store.list(ALICE)).items == ()
        assert (await store.list(BOB)).items == ()

    async def test_lexical_ranks_the_matching_item_first(self, store):
        ids = await add_texts(store, ALICE, ALICE_TEXTS)
        rankings = await store.lexical(ALICE, ["raspberry pi cluster", "volcano hike", "", "qwertyuiop"], 5)
        assert len(rankings) == 4
        assert rankings[0][0].item_id == ids[0]
        assert rankings[1][0].item_id == ids[2]
        assert rankings[2] == [] and rankings[3] == []
        assert all(h.score > 0 for r in rankings for h in r)

    async def test_dense_ranks_by_cosine(self, store):
        ids = await add_texts(store, ALICE, ALICE_TEXTS)
        (ranking,) = await store.dense(ALICE, EMBEDDER.embed(["helm chart version kestrel"]), 2)
        assert len(ranking) == 2
        assert ranking[0].item_id == ids[1]
        assert ranking[0].score >= ranking[1].score
        assert ranking[0].score == pytest.approx(
            float(EMBEDDER.embed(["helm chart version kestrel"])[0] @ EMBEDDER.embed([ALICE_TEXTS[1]])[0]), abs=1e-5
        )

    async def test_dense_refuses_another_dimension(self, store):
        await add_texts(store, ALICE, ALICE_TEXTS)
        with pytest.raises(ConfigurationError):
            await store.dense(ALICE, np.ones((1, 12), dtype=np.float32), 3)

    async def test_k_caps_the_hits(self, store):
        await add_texts(store, ALICE, [f"Alice: kestrel note number {n}" for n in range(8)])
        assert len((await store.lexical(ALICE, ["kestrel note"], 3))[0]) == 3
        assert len((await store.dense(ALICE, EMBEDDER.embed(["kestrel note"]), 3))[0]) == 3

    async def test_search_sees_items_added_after_an_earlier_search(self, store):
        await add_texts(store, ALICE, ALICE_TEXTS)
        assert (await store.lexical(ALICE, ["zeppelin"], 5)) == [[]]
        (late,) = await add_texts(store, ALICE, ["Alice: a zeppelin passed by"], start=2000.0)
        assert [h.item_id for h in (await store.lexical(ALICE, ["zeppelin"], 5))[0]] == [late]
        assert (await store.dense(ALICE, EMBEDDER.embed(["zeppelin passed"]), 1))[0][0].item_id == late

    async def test_lexical_statistics_are_the_users_own(self, store):
        # "kestrel" is in every one of Bob's items: were his counts pooled with Alice's, her ranking would change
        (alice_item,) = await add_texts(store, ALICE, ["Alice: kestrel and the zeppelin"])
        before = (await store.lexical(ALICE, ["kestrel zeppelin"], 5))[0]
        await add_texts(store, BOB, [f"Bob: kestrel kestrel number {n}" for n in range(20)])
        after = (await store.lexical(ALICE, ["kestrel zeppelin"], 5))[0]
        assert [h.item_id for h in after] == [alice_item]
        assert after[0].score == pytest.approx(before[0].score)

    async def test_list_is_newest_first_and_pages_cover_everything_once(self, store):
        ids = await add_texts(store, ALICE, [f"Alice: note {n}" for n in range(7)])
        await store.add(ALICE, [fact(ALICE, "prefers", "Helm", time=500.0)])
        first = await store.list(ALICE, limit=3)
        assert [i.id for i in first.items] == ids[::-1][:3] and first.next_offset == 3
        seen = [i.id for i in first.items]
        offset = first.next_offset
        while offset is not None:
            page = await store.list(ALICE, limit=3, offset=offset)
            seen.extend(i.id for i in page.items)
            offset = page.next_offset
        assert len(seen) == 8 and len(set(seen)) == 8
        facts = await store.list(ALICE, kind="fact")
        assert [i.kind for i in facts.items] == ["fact"] and facts.next_offset is None

    # --- facts: supersede, don't delete ---------------------------------------------------------------------

    async def test_a_newer_fact_closes_the_older_one_and_both_are_kept(self, store):
        old = fact(ALICE, "chart version", "2.3.1", time=1000.0)
        new = fact(ALICE, "chart version", "2.4.0", time=2000.0)
        await store.add(ALICE, [old])
        await store.add(ALICE, [new])
        got = await store.get_many(ALICE, [old.id, new.id])
        assert got[old.id].valid_to == 2000.0 and not got[old.id].current
        assert got[new.id].current
        assert len((await store.list(ALICE, kind="fact")).items) == 2

    async def test_facts_of_other_attributes_subjects_and_users_stay_current(self, store):
        mine = fact(ALICE, "uses", "k3s")
        other_attribute = fact(ALICE, "prefers", "Helm")
        other_subject = fact(ALICE, "uses", "ArgoCD", subject="team")
        bobs = fact(BOB, "uses", "nomad")
        await store.add(ALICE, [mine, other_attribute, other_subject])
        await store.add(BOB, [bobs])
        await store.add(ALICE, [fact(ALICE, "uses", "k8s", time=3000.0)])
        got = await store.get_many(ALICE, [mine.id, other_attribute.id, other_subject.id])
        assert not got[mine.id].current
        assert got[other_attribute.id].current and got[other_subject.id].current
        assert (await store.get_many(BOB, [bobs.id]))[bobs.id].current

    async def test_a_repeated_current_fact_is_not_stored_twice(self, store):
        first = fact(ALICE, "uses", "k3s", time=1000.0)
        again = fact(ALICE, "uses", "k3s", time=2000.0)
        assert await store.add(ALICE, [first]) == [first]
        assert await store.add(ALICE, [again]) == []
        facts = (await store.list(ALICE, kind="fact")).items
        assert [f.id for f in facts] == [first.id] and facts[0].current

    # --- entities and profile --------------------------------------------------------------------------------

    async def test_entities_are_counted_case_folded_with_last_seen(self, store):
        await store.upsert_entities(
            ALICE, [EntityMention("Helm", "product", 100.0), EntityMention("k3s", "platform", 150.0)]
        )
        await store.upsert_entities(ALICE, [EntityMention("helm", "product", 300.0)])
        entities = await store.entities(ALICE)
        assert [(e.key, e.mentions) for e in entities] == [("helm", 2), ("k3s", 1)]
        helm = entities[0]
        assert helm.name == "Helm" and helm.first_seen == 100.0 and helm.last_seen == 300.0

    async def test_profile_is_none_until_set_then_replaced(self, store):
        assert await store.profile(ALICE) is None
        await store.set_profile(ALICE, "runs k3s", ["c1"])
        await store.set_profile(ALICE, "runs k3s on a Pi", ["c1", "c2"])
        profile = await store.profile(ALICE)
        assert profile is not None and profile.text == "runs k3s on a Pi" and profile.covers == ("c1", "c2")

    # --- isolation: every method across two users -------------------------------------------------------------

    async def test_every_read_is_isolated_across_users(self, store):
        alice, bob = await self._fill(store)
        bob_set = set(bob)
        queries = ["helm chart version release", "run cluster", "k3s nomad"]
        for rankings in (
            await store.lexical(ALICE, queries, 50),
            await store.dense(ALICE, EMBEDDER.embed(queries), 50),
        ):
            assert all(rankings) and not {h.item_id for r in rankings for h in r} & bob_set
        assert await store.get_many(ALICE, bob) == {}
        listed = (await store.list(ALICE, limit=100)).items
        assert {i.user_id for i in listed} == {ALICE} and not {i.id for i in listed} & bob_set
        assert {e.user_id for e in await store.entities(ALICE)} == {ALICE}
        profile = await store.profile(ALICE)
        assert profile is not None and profile.user_id == ALICE and "bob" not in profile.text
        exported = await store.export(ALICE)
        assert {i.user_id for i in exported.items} == {ALICE} and not {i.id for i in exported.items} & bob_set
        assert {e.user_id for e in exported.entities} == {ALICE}
        assert exported.profile is not None and exported.profile.user_id == ALICE
        for item_id in bob:  # another user's id is missing, and stays stored
            with pytest.raises(MemoryNotFoundError):
                await store.delete(ALICE, item_id)
        assert set(await store.get_many(BOB, bob)) == bob_set
        assert set(await store.get_many(ALICE, alice)) == set(alice)
        assert await store.lexical("carol", queries, 5) == [[], [], []]
        assert (await store.list("carol")).items == ()

    async def test_a_fact_of_one_user_never_closes_another_users(self, store):
        bobs = fact(BOB, "chart version", "9.9.9")
        await store.add(BOB, [bobs])
        await store.add(ALICE, [fact(ALICE, "chart version", "2.3.1", time=5000.0)])
        assert (await store.get_many(BOB, [bobs.id]))[bobs.id].current

    # --- removal ---------------------------------------------------------------------------------------------

    async def test_delete_forgets_the_item_and_its_vector(self, store):
        ids = await add_texts(store, ALICE, ALICE_TEXTS)
        await store.delete(ALICE, ids[0])
        assert ids[0] not in await store.get_many(ALICE, ids)
        assert ids[0] not in {h.item_id for h in (await store.lexical(ALICE, ["raspberry pi k3s"], 5))[0]}
        assert ids[0] not in {h.item_id for h in (await store.dense(ALICE, EMBEDDER.embed([ALICE_TEXTS[0]]), 5))[0]}
        with pytest.raises(MemoryNotFoundError):
            await store.delete(ALICE, ids[0])
        with pytest.raises(MemoryNotFoundError):
            await store.delete(ALICE, "no-such-id")

    async def test_erase_user_leaves_no_row_of_the_user_and_every_row_of_others(self, store):
        await self._fill(store)
        alice_rows = await self.rows_of(store, ALICE)
        bob_rows = await self.rows_of(store, BOB)
        assert all(n > 0 for n in alice_rows.values()), alice_rows  # every table had something to erase
        counts = await store.erase_user(ALICE)
        assert set(counts) == {"memories", "vectors", "entities", "profiles"}
        assert counts["memories"] == len(ALICE_TEXTS) + 1 and counts["vectors"] == len(ALICE_TEXTS)
        assert counts["entities"] == 1 and counts["profiles"] == 1
        assert all(n == 0 for n in (await self.rows_of(store, ALICE)).values())
        assert await self.rows_of(store, BOB) == bob_rows
        assert (await store.lexical(ALICE, ["helm chart"], 5)) == [[]]
        assert (await store.dense(ALICE, EMBEDDER.embed(["helm chart"]), 5)) == [[]]
        assert await store.erase_user(ALICE) == {"memories": 0, "vectors": 0, "entities": 0, "profiles": 0}

    async def test_a_write_begun_before_an_erase_is_dropped_and_others_are_not(self, store):
        began, bob_began = await store.epoch(ALICE), await store.epoch(BOB)
        first = episode(ALICE, ALICE_TEXTS[0])
        assert await store.add(ALICE, [first], EMBEDDER.embed([first.text]), epoch=began) == [first]
        await store.erase_user(ALICE)
        assert await store.epoch(ALICE) == began + 1 and await store.epoch(BOB) == bob_began
        late = [episode(ALICE, ALICE_TEXTS[1]), fact(ALICE, "uses", "k3s")]
        assert await store.add(ALICE, late, EMBEDDER.embed([i.text for i in late]), epoch=began) == []
        await store.upsert_entities(ALICE, [EntityMention("Helm", "product", 1000.0)], epoch=began)
        await store.set_profile(ALICE, "alice runs k3s", epoch=began)
        assert all(n == 0 for n in (await self.rows_of(store, ALICE)).values())
        assert await store.profile(ALICE) is None and await store.entities(ALICE) == []
        bobs = episode(BOB, BOB_TEXTS[0])
        assert await store.add(BOB, [bobs], EMBEDDER.embed([bobs.text]), epoch=bob_began) == [bobs]
        now = episode(ALICE, ALICE_TEXTS[2])  # a turn begun after the erase is remembered
        assert await store.add(ALICE, [now], EMBEDDER.embed([now.text]), epoch=await store.epoch(ALICE)) == [now]

    async def test_delete_expired_removes_old_items_of_every_user(self, store):
        old = await add_texts(store, ALICE, ["Alice: old note about zeppelins"], start=100.0)
        young = await add_texts(store, ALICE, ["Alice: new note about zeppelins"], start=5000.0)
        bob_old = await add_texts(store, BOB, ["Bob: old note"], start=100.0)
        await store.upsert_entities(ALICE, [EntityMention("Zeppelin", "product", 100.0)])
        counts = await store.delete_expired(1000.0)
        assert counts["memories"] == 2 and counts["vectors"] == 2 and counts["entities"] == 1
        assert set(await store.get_many(ALICE, old + young)) == set(young)
        assert await store.get_many(BOB, bob_old) == {}
        assert [h.item_id for h in (await store.lexical(ALICE, ["zeppelins"], 5))[0]] == young

    async def test_export_holds_everything_of_the_user(self, store):
        alice, _ = await self._fill(store)
        exported = await store.export(ALICE)
        assert set(alice) <= {i.id for i in exported.items} and len(exported.items) == len(alice) + 1
        assert [e.key for e in exported.entities] == ["helm"]
        assert exported.profile is not None and exported.profile.text == "alice runs a home cluster"
