"""Updates supersede: each way of saying a thing changed leaves one current value per subject and attribute, the
old one closed (``valid_to``) and kept. Through the real writer and SQLite store, with the hashing embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.memory.sqlite_store import SQLiteMemoryStore
from anaphora.memory.writer import TurnRecorder, TurnToRemember
from anaphora.store import Database

pytestmark = pytest.mark.unit


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteMemoryStore]:
    database = Database(tmp_path / "memory.db")
    yield SQLiteMemoryStore(database)
    database.close()


async def said(store, *messages: str, day: int = 0) -> list:
    """Each message a turn of its own, a day apart from ``day`` on; the user's facts afterwards (newest first)."""
    recorder = TurnRecorder(store, HashingEmbedder(384))
    for n, message in enumerate(messages, day):
        await recorder.record(TurnToRemember("alice", f"c{n}", 0, message, 1_700_000_000.0 + n * 86400))
    return list((await store.list("alice", kind="fact")).items)


def current(facts) -> dict[str, str]:
    found = {}
    for f in facts:
        if f.current:
            assert f.attribute not in found, f"two current values of {f.attribute!r}"
            found[f.attribute] = f.value
    return found


@pytest.mark.parametrize(
    ("update", "value"),
    [
        ("I upgraded to Fluent Bit 3.2", "Fluent Bit 3.2 on ARM64 nodes"),
        ("I upgraded my nodes to Fluent Bit 3.2 last week", "Fluent Bit 3.2 on ARM64 nodes"),
        ("I upgraded to 3.2", "Fluent Bit 3.2 on ARM64 nodes"),  # no name: the current fact with a version
        ("we upgraded Fluent Bit to 3.2 yesterday", "Fluent Bit 3.2 on ARM64 nodes"),
        ("we moved to Fluent Bit 3.2", "Fluent Bit 3.2 on ARM64 nodes"),
        ("we're on Fluent Bit 3.2 now", "Fluent Bit 3.2 on ARM64 nodes"),
        ("I run Fluent Bit 3.2 on x86 nodes", "Fluent Bit 3.2 on x86 nodes"),  # a restatement replaces it whole
    ],
)
async def test_a_new_version_supersedes_the_old_one(store, update: str, value: str) -> None:
    facts = await said(store, "I run Fluent Bit 2.1 on ARM64 nodes", update)
    assert current(facts) == {"uses fluent": value}
    (old,) = [f for f in facts if not f.current]
    assert old.value == "Fluent Bit 2.1 on ARM64 nodes" and old.valid_to == 1_700_086_400.0


@pytest.mark.parametrize(
    "update",
    [
        "we don't use Promtail anymore",
        "we're not on Promtail any more",
        "I no longer run Promtail",
        "we stopped using Promtail",
        "logs go through Alloy now. No more Promtail.",
        "so no more Promtail for us",
    ],
)
async def test_not_any_more_closes_the_fact(store, update: str) -> None:
    facts = await said(store, "we use Promtail to ship logs", update)
    assert current(facts) == {"uses promtail": "no longer Promtail"}
    assert [f.value for f in facts if not f.current] == ["Promtail to ship logs"]


@pytest.mark.parametrize(
    "update", ["we switched from Promtail to Alloy", "we migrated from Promtail to Alloy last month"]
)
async def test_switching_from_one_thing_to_another_closes_the_old_and_adds_the_new(store, update: str) -> None:
    facts = await said(store, "we use Promtail to ship logs", update)
    assert current(facts) == {"uses promtail": "no longer Promtail", "uses alloy": "Alloy"}
    profile = (await store.profile("alice")).text
    assert "Alloy" in profile and "the user uses Promtail" not in profile


async def test_no_more_needs_a_name() -> None:
    """ "no more" drops a thing only when a name follows it, as names are written: an amount or a common noun is no
    thing the user used."""
    from anaphora.reading.extract import extract_facts

    for message in ("no more than 5 replicas, please", "no more errors since the fix"):
        assert not [f for f in extract_facts(message) if f.value.startswith("no longer")]


async def test_other_things_and_single_valued_facts_stay_current(store) -> None:
    facts = await said(store, "I run k3s 1.29 on a Pi", "I run Postgres 16", "I upgraded to 1.30", "I live in Lyon")
    # "1.30" is a version of the newest current fact that has one ("16" is no dotted version)
    assert current(facts) == {"uses k3s": "k3s 1.30 on a Pi", "uses postgres": "Postgres 16", "lives in": "Lyon"}
    facts = await said(store, "I live in Porto", day=10)
    assert current(facts)["lives in"] == "Porto"
