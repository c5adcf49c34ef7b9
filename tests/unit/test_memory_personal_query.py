"""The user's stated setup joins the retrieval query: the current facts stated in this conversation, and for a
question about the user the facts that answer it; the plan's own query (what recall and the answer rank by) and
the message's places in the fusion stay. Through the real writer and SQLite store, the stage run as the engine
runs it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.memory.sqlite_store import SQLiteMemoryStore
from anaphora.memory.writer import TurnRecorder, TurnToRemember
from anaphora.pipeline.memory import PersonalQuery
from anaphora.pipeline.query import QueryPlan
from anaphora.pipeline.state import TurnRequest
from anaphora.store import Database
from anaphora.testing.stages import run_stage, turn_state

pytestmark = pytest.mark.unit
QUESTION = "how do I get container logs into Loki without an agent?"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteMemoryStore]:
    database = Database(tmp_path / "memory.db")
    yield SQLiteMemoryStore(database)
    database.close()


async def said(store, message: str, conversation: str, index: int = 0, day: int = 0) -> None:
    turn = TurnToRemember("alice", conversation, index, message, 1_700_000_000.0 + day * 86400)
    await TurnRecorder(store, HashingEmbedder(64)).record(turn)


async def planned(store, question: str, conversation: str, *, memory: bool = True):
    request = TurnRequest(question, user_id="alice", conversation_id=conversation, memory=memory)
    state = turn_state(question, plan=QueryPlan(question, "question")).update(request=request)
    return await run_stage(PersonalQuery(store, timeout_s=2.0), state)


async def test_a_fact_stated_in_this_conversation_joins_the_query_that_leads(store) -> None:
    await said(store, "fyi all our docker hosts are ARM64 (graviton boxes)", "c1")
    after, record = await planned(store, QUESTION, "c1")
    assert record is not None and record.status == "ok"
    assert after.plan.lead == f"{QUESTION} docker hosts are ARM64 (graviton boxes)"
    assert after.plan.query == QUESTION  # recall and the answer rank by the turn's own query
    assert after.plan.queries == [after.plan.lead, QUESTION]  # the query it was made from rides along


async def test_a_fact_of_another_conversation_joins_only_a_question_about_the_user_it_answers(store) -> None:
    await said(store, "I run Fluent Bit 2.1 on ARM64 nodes", "c1")
    after, record = await planned(store, QUESTION, "c2")
    assert record.status == "skipped" and after.plan.lead is None
    after, _ = await planned(store, "which version did I say I run?", "c2")
    assert after.plan.lead == "which version did I say I run? runs Fluent Bit 2.1 on ARM64 nodes"


async def test_outdated_and_no_longer_facts_add_nothing(store) -> None:
    await said(store, "we use Promtail to ship logs", "c1")
    await said(store, "we switched from Promtail to Alloy", "c1", index=1, day=1)
    after, _ = await planned(store, QUESTION, "c1")
    assert after.plan.lead == f"{QUESTION} uses Alloy"  # not Promtail: neither the old fact nor its closing one


async def test_a_temporary_chat_is_not_personalised(store) -> None:
    await said(store, "fyi all our docker hosts are ARM64", "c1")
    _, record = await planned(store, QUESTION, "c1", memory=False)
    assert record is None
