"""The user's stated setup joins the retrieval query: the current facts stated in this conversation, and for a
question about the user the facts that answer it; recall ranks by the query without them. Through the real writer
and SQLite store, the stage run as the engine runs it."""

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


async def planned(store, question: str, conversation: str | None, *, memory: bool = True, turns_before: int = 1):
    """The stage on a turn of ``conversation`` after ``turns_before`` stored turns."""
    request = TurnRequest(question, user_id="alice", conversation_id=conversation, memory=memory)
    state = turn_state(question, plan=QueryPlan(question, "question"), turns_before=turns_before)
    return await run_stage(PersonalQuery(store, timeout_s=2.0), state.update(request=request))


class CountingReads:
    """A memory reader that counts its reads."""

    def __init__(self, store: SQLiteMemoryStore) -> None:
        self.store, self.reads = store, 0

    async def list(self, *args, **kwargs):
        self.reads += 1
        return await self.store.list(*args, **kwargs)


@pytest.mark.parametrize(("conversation", "turns_before"), [("c2", 0), (None, 3)])
async def test_a_first_or_stateless_turn_reads_memory_only_for_a_question_about_the_user(
    store, conversation, turns_before
) -> None:
    """No statement of this conversation can exist yet (or it has no stored turns): only facts of other
    conversations could bear, and those only on a question about the user."""
    await said(store, "I run Fluent Bit 2.1 on ARM64 nodes", "c1")
    reads = CountingReads(store)
    request = TurnRequest(QUESTION, user_id="alice", conversation_id=conversation)
    state = turn_state(QUESTION, plan=QueryPlan(QUESTION, "question"), turns_before=turns_before)
    after, record = await run_stage(PersonalQuery(reads, timeout_s=2.0), state.update(request=request))
    assert record is None and reads.reads == 0 and after.plan.query == QUESTION
    about_me = "which version did I say I run?"
    state = turn_state(about_me, plan=QueryPlan(about_me, "question"), turns_before=turns_before)
    after, record = await run_stage(PersonalQuery(reads, timeout_s=2.0), state.update(request=request))
    assert record.status == "ok" and after.plan.query == f"{about_me} runs Fluent Bit 2.1 on ARM64 nodes"


async def test_a_fact_of_another_conversation_the_question_states_again_is_not_added_twice(store) -> None:
    """The user says it now: the query already holds it (a second copy weighed it double in the dense query, and a
    re-run of a conversation retrieved for its first question what the first run had not)."""
    await said(store, "we run Traefik v3 in docker compose", "c1")
    question = "running Traefik v3 in docker compose. how do i get certs for my containers?"
    after, _ = await planned(store, question, "c2", turns_before=0)
    assert after.plan.query == question and after.personal == ""


async def test_a_fact_stated_in_this_conversation_joins_the_query_that_leads(store) -> None:
    await said(store, "fyi all our docker hosts are ARM64 (graviton boxes)", "c1")
    after, record = await planned(store, QUESTION, "c1")
    assert record is not None and record.status == "ok"
    assert after.plan.query == f"{QUESTION} docker hosts are ARM64 (graviton boxes)"
    assert after.personal == "docker hosts are ARM64 (graviton boxes)"  # what recall leaves out of its query


async def test_a_fact_of_another_conversation_joins_only_a_question_about_the_user_it_answers(store) -> None:
    await said(store, "I run Fluent Bit 2.1 on ARM64 nodes", "c1")
    after, record = await planned(store, QUESTION, "c2")
    assert record.status == "skipped" and after.plan.query == QUESTION
    after, _ = await planned(store, "which version did I say I run?", "c2")
    assert after.plan.query == "which version did I say I run? runs Fluent Bit 2.1 on ARM64 nodes"


async def test_outdated_and_no_longer_facts_add_nothing(store) -> None:
    await said(store, "we use Promtail to ship logs", "c1")
    await said(store, "we switched from Promtail to Alloy", "c1", index=1, day=1)
    after, _ = await planned(store, QUESTION, "c1")
    assert after.plan.query == f"{QUESTION} uses Alloy"  # not Promtail: neither the old fact nor its closing one


async def test_a_temporary_chat_is_not_personalised(store) -> None:
    await said(store, "fyi all our docker hosts are ARM64", "c1")
    _, record = await planned(store, QUESTION, "c1", memory=False)
    assert record is None


async def test_a_follow_ups_leading_expansion_is_personalised_too(store) -> None:
    await said(store, "our DNS is hosted on cloudflare btw", "c1")
    request = TurnRequest("so what do I set for the provider?", user_id="alice", conversation_id="c1")
    plan = QueryPlan("so what do I set for the provider? dns challenge", "rewrite", lead="provider dns challenge")
    state = turn_state(request.question, plan=plan, turns_before=1).update(request=request)
    after, _ = await run_stage(PersonalQuery(store, timeout_s=2.0), state)
    assert after.plan.lead == "provider dns challenge DNS is hosted on cloudflare"
    assert after.plan.query == "so what do I set for the provider? dns challenge DNS is hosted on cloudflare"


async def test_a_statement_no_fact_rule_reads_joins_in_the_users_words(store) -> None:
    statement = "context: we're multi-tenant. tenant `payments` has to keep logs 90 days for audit"
    await said(store, statement, "c1")
    after, _ = await planned(store, "ok so what would the config look like for that?", "c1")
    stated = statement.removeprefix("context: ")  # the label says how it was introduced, not what was said
    assert after.plan.query == f"ok so what would the config look like for that? {stated}"


async def test_only_the_newest_statements_join(store) -> None:
    for n, thing in enumerate(["Alloy v1.4", "k3s 1.29", "Postgres 16", "Redis 7.2"]):
        await said(store, f"we run {thing}", "c1", index=n, day=n)
    after, _ = await planned(store, QUESTION, "c1")
    assert after.personal == "runs Redis 7.2 runs Postgres 16 runs k3s 1.29"


async def test_a_question_is_not_taken_for_a_statement(store) -> None:
    await said(store, "how do I turn on retention?", "c1")
    _, record = await planned(store, QUESTION, "c1")
    assert record.status == "skipped"


@pytest.mark.parametrize(
    ("question", "episode", "shown"),
    [
        ("why does curl get a 401?", "curl against the API gives me a 401. what's that about?", False),  # asked
        ("did I say what curl gave me?", "curl against the API gives me a 401. what's that about?", True),
        ("one container gives me 502 bad gateway", "one container gives me 502 bad gateway", False),  # the same
        ("which version should I pick?", "I run Fluent Bit 2.1 on ARM64 nodes", True),
    ],
)
def test_an_earlier_question_or_the_same_words_again_are_no_evidence(question, episode, shown) -> None:
    from anaphora.reading.message import read
    from anaphora.reading.personal import evidence_for

    assert evidence_for(read(question), read(episode)) is shown


def test_an_episode_that_repeats_a_message_already_in_the_prompt_is_no_evidence() -> None:
    from anaphora.reading.message import read
    from anaphora.reading.personal import evidence_for

    earlier = "one container gives me 502 bad gateway through traefik, the app listens on 8080"
    assert not evidence_for(read("it's also attached to two networks, does that matter?"), read(earlier), [earlier])
    assert evidence_for(read("it's also attached to two networks, does that matter?"), read(earlier), [])


async def test_a_fact_restated_here_counts_though_the_store_kept_the_earlier_one(store) -> None:
    await said(store, "fyi all our docker hosts are ARM64", "c1")
    await said(store, "fyi all our docker hosts are ARM64", "c2", day=1)  # the same again: no new fact row
    after, _ = await planned(store, QUESTION, "c2")
    assert after.personal == "docker hosts are ARM64"


async def test_an_outdated_statement_is_said_as_its_current_value(store) -> None:
    await said(store, "I run Fluent Bit 2.1 on ARM64 nodes", "c1")
    await said(store, "I upgraded to 3.2", "c2", day=1)
    await said(store, "I run Fluent Bit 2.1 on ARM64 nodes", "c3", day=2)
    await said(store, "we moved to Fluent Bit 3.2", "c3", index=1, day=3)
    after, _ = await planned(store, QUESTION, "c3")
    assert after.personal == "runs Fluent Bit 3.2 on ARM64 nodes"  # once, though two turns of c3 stated it


async def test_only_what_the_previous_message_stated_is_said_back(store) -> None:
    await said(store, "fyi all our docker hosts are ARM64 (graviton boxes)", "c1", index=0)
    request = TurnRequest(QUESTION, user_id="alice", conversation_id="c1")
    for turns_before, expected in ((1, "As you said, your docker hosts are ARM64 (graviton boxes)."), (2, "")):
        state = turn_state(QUESTION, plan=QueryPlan(QUESTION, "question"), turns_before=turns_before)
        after, _ = await run_stage(PersonalQuery(store, timeout_s=2.0), state.update(request=request))
        assert after.said_back == expected
        assert after.personal == "docker hosts are ARM64 (graviton boxes)"  # the query is personalised either way
