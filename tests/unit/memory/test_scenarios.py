"""A scripted scenario of what a user of a personal assistant expects from "remember this": state, update, ask,
forget, erase, across conversations and users. Through the library with the shipped fakes (the fake chat model
records every prompt; the hashing embedder needs no model); answers in the extractive mode quote, no model call."""

from __future__ import annotations

import re

import pytest

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.pipeline.answer import NOT_TOLD
from anaphora.pipeline.check import NOT_COVERED
from anaphora.reading.message import read
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit
MEMORY_ID = re.compile(r"\[memory:[0-9a-f]+\]")


@pytest.fixture
def rag(tmp_path):
    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        answer_mode="extractive",
    )
    with Anaphora(settings, model=FakeChatModel()) as instance:
        instance.ingest([SAMPLE_DOCS])
        yield instance


def ask(rag: Anaphora, question: str, conversation: str, user: str = "alice"):
    result = rag.ask(question, conversation, user_id=user)
    rag.settle()  # the memory write runs after the answer, in the background
    return result


def ask_anew(rag: Anaphora, question: str, user: str = "alice"):
    """``question`` as the first message of a new conversation."""
    return ask(rag, question, rag.new_conversation(user_id=user), user)


def test_state_update_ask_forget_erase_across_conversations_and_users(rag: Anaphora) -> None:
    model = rag.components.chat_model
    first = rag.new_conversation(user_id="alice")
    stated = ask(rag, "I run Fluent Bit 2.1 on ARM64 nodes", first)
    assert stated.answer == "Noted: you run Fluent Bit 2.1 on ARM64 nodes. I'll remember that."
    assert stated.citations == [] and stated.trace.retrieval_skipped and not model.calls  # acknowledged, no quotes

    second = rag.new_conversation(user_id="alice")
    asked = ask(rag, "which version did I say I run?", second)
    assert asked.answer.startswith("You run Fluent Bit 2.1 on ARM64 nodes. [memory:")  # the fact leads, cited
    assert MEMORY_ID.sub("", asked.answer).strip() == "You run Fluent Bit 2.1 on ARM64 nodes."  # nothing else to say
    assert any(c.id.startswith("memory:") for c in asked.citations)
    (lead,) = [m for m in asked.trace.memory if m.leads]
    assert lead.kind == "fact" and lead.injected and lead.current

    ask(rag, "I upgraded my nodes to Fluent Bit 3.2 last week", second)
    third = rag.new_conversation(user_id="alice")
    again = ask(rag, "what architecture are my nodes?", third)
    assert again.answer.startswith("You run Fluent Bit 3.2 on ARM64 nodes. [memory:")
    assert "2.1" not in again.answer and [m.text for m in again.trace.memory if m.leads] == [
        "the user runs Fluent Bit 3.2 on ARM64 nodes"
    ]
    facts = rag.memories(user_id="alice", kind="fact").items
    assert [f.value for f in facts if f.current] == ["Fluent Bit 3.2 on ARM64 nodes"]

    other = ask(rag, "how do I install Kestrel on Kubernetes?", third)  # about the documents, not the user
    assert not [m for m in other.trace.memory if m.leads] and not MEMORY_ID.search(other.answer)
    unrelated = ask(rag, "what is my favourite colour?", third)  # about the user, but no fact answers it
    assert not [m for m in unrelated.trace.memory if m.leads]

    bob = rag.new_conversation(user_id="bob")
    bobs = ask(rag, "which version did I say I run?", bob, user="bob")
    assert bobs.trace.memory == [] and "Fluent Bit" not in bobs.answer  # no cross-user recall

    (current,) = [f for f in facts if f.current]
    rag.forget(current.id, user_id="alice")
    model.calls.clear()
    fourth = rag.new_conversation(user_id="alice")
    after = ask(rag, "which version did I say I run?", fourth)
    assert "3.2" not in after.answer and not [m for m in after.trace.memory if "3.2" in m.text]
    ask(rag, "hello", fourth)  # chit-chat: the model sees the profile in its system message
    assert all("3.2" not in m.content for call in model.calls for m in call.messages)

    rag.erase_user("alice")
    assert rag.memories(user_id="alice").items == ()
    assert [m.text for m in rag.memories(user_id="bob").items] == ["which version did I say I run?"]
    fifth = rag.new_conversation(user_id="alice")
    assert ask(rag, "which version did I say I run?", fifth).trace.memory == []


def test_a_question_the_facts_answer_whole_is_answered_with_them_alone(rag: Anaphora) -> None:
    """Before, the fact came with document sentences that only shared "Kestrel" and "version" (an x86-64 tarball
    for an ARM64 user); a question the fact does not cover whole still gets the documents."""
    ask(rag, "I run Kestrel 3.4.1 on ARM64 nodes", rag.new_conversation(user_id="alice"))
    now = ask(rag, "what Kestrel version are we on now?", rag.new_conversation(user_id="alice"))
    assert MEMORY_ID.sub("", now.answer).strip() == "You run Kestrel 3.4.1 on ARM64 nodes."
    assert [c.id for c in now.citations if not c.id.startswith("memory:")] == []
    upgrade = ask(rag, "how do I upgrade my Kestrel version with Helm?", rag.new_conversation(user_id="alice"))
    assert "helm" in MEMORY_ID.sub("", upgrade.answer).lower()


def test_a_statement_in_a_temporary_chat_says_it_is_not_kept(rag: Anaphora) -> None:
    conversation = rag.new_conversation()
    result = rag.ask("fyi: we run Traefik v3 as a plain binary on a VM", conversation, memory=False)
    assert result.answer == "Noted: you run Traefik v3 as a plain binary on a VM. (This chat is not remembered.)"
    rag.settle()
    assert rag.memories().items == ()


@pytest.mark.parametrize(
    "message",
    [
        "I run Fluent Bit 2.1, how do I enable the http output?",
        "I need /api stripped off before requests hit my backend",
        "our ingesters keep crashing after the upgrade",
        "the dashboard shows nothing",
    ],
)
def test_questions_requests_and_trouble_are_answered_not_acknowledged(rag: Anaphora, message: str) -> None:
    result = rag.ask(message, rag.new_conversation())
    assert result.trace.answer_source != "acknowledged" and not result.trace.retrieval_skipped


@pytest.mark.parametrize(
    ("question", "answers"),
    [
        ("which version did I say I run?", True),
        ("what architecture are my nodes?", True),
        ("is the setting you described available for my version?", True),
        ("what do I run?", True),
        ("how do I configure Fluent Bit outputs for my cluster?", False),  # a shared product name alone
        ("what is my favourite colour?", False),
    ],
)
def test_a_fact_answers_a_question_about_the_user_by_more_than_a_shared_name(question: str, answers: bool) -> None:
    from anaphora.reading.message import read
    from anaphora.reading.personal import fact_answers

    assert read(question).about_user
    fact = "the user runs Fluent Bit 2.1 on ARM64 nodes"
    assert fact_answers(question, fact, "Fluent Bit 2.1 on ARM64 nodes") is answers


@pytest.mark.parametrize(
    ("question", "alone"),
    [
        ("which version did I say I run?", True),
        ("what version are we on now?", True),
        ("which Fluent Bit version do I run?", True),
        ("which chart version did I say I run?", True),  # what the user said: no document can tell
        ("which platform did I say we run?", True),
        ("which version did I say I run, and does it support OTLP?", False),  # a second question asks them
        ("is the setting you described available for my version?", False),
        ("is there a Helm chart for my version?", False),
        # what a thing of the user's is: only what the user said can tell ("architecture" is not in the fact, but
        # no document knows the user's nodes; before, a startup log block followed the fact)
        ("what architecture are my nodes?", True),
        ("which platform should my nodes use?", False),  # advice: the documents answer it
        ("how do I limit Fluent Bit's memory on my nodes?", False),
    ],
)
def test_the_facts_alone_answer_a_question_they_say_everything_of(question: str, alone: bool) -> None:
    """Then the answer is the facts, without document sentences that only share a word ("version")."""
    from anaphora.reading.message import read
    from anaphora.reading.personal import facts_answer

    assert facts_answer(read(question), ["the user runs Fluent Bit 2.1 on ARM64 nodes"]) is alone
    assert not facts_answer(read(question), [])


def test_a_word_the_documents_use_everywhere_is_no_evidence_either() -> None:
    """On a docs site every page says the product's name: sharing it does not make a fact answer the question."""
    from anaphora.reading.message import read
    from anaphora.reading.personal import fact_answers

    question = "our IdP only speaks SAML. can traefik do SAML login in front of the dashboard?"
    fact = "the user runs traefik v3 as a plain binary on a VM"
    assert read(question).about_user and not read(question).asks_what_user_said  # it asks the documents
    assert fact_answers(question, fact, "traefik v3")
    assert not fact_answers(question, fact, "traefik v3", generic=["traefik"])
    assert read("which version did I say I run?").asks_what_user_said and read("am I on v3?").asks_what_user_said


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("what architecture are my nodes?", True),
        ("which version is our cluster on?", True),
        ("what OS are our hosts running?", True),
        ("which platform should my nodes use?", False),
        ("what are my options?", False),
        ("what ports are my services exposed on?", False),
        ("what limits are my pods hitting?", False),
        ("what is my best option for retention?", False),
    ],
)
def test_the_kind_of_a_thing_of_the_users_asks_what_the_user_said(question: str, asks: bool) -> None:

    assert read(question).asks_what_user_said is asks


def test_what_a_thing_of_the_users_is_is_answered_with_the_fact_alone(rag: Anaphora) -> None:
    ask(rag, "I run Fluent Bit 2.1 on ARM64 nodes", rag.new_conversation(user_id="alice"))
    asked = ask_anew(rag, "what architecture are my nodes?")
    assert MEMORY_ID.sub("", asked.answer).strip() == "You run Fluent Bit 2.1 on ARM64 nodes."
    assert [c.id for c in asked.citations if not c.id.startswith("memory:")] == []


@pytest.mark.parametrize("question", ["how do I install Kestrel?", "can I use TLS?", "what is Loki?"])
def test_questions_about_the_documents_are_not_about_the_user(question: str) -> None:
    from anaphora.reading.message import read

    assert not read(question).about_user


def test_the_answer_after_a_statement_says_back_what_it_took_into_account(rag: Anaphora) -> None:
    """A quoted answer cannot adapt the documents to the user's setup: the one right after a statement says which
    statement it took into account, once; it quotes the documents, not the user's own words of this conversation
    (they are in its history); a recap of the conversation leaves the said-back line out."""
    conversation = rag.new_conversation(user_id="bob")
    ask(rag, "fyi all our nodes are ARM64", conversation, user="bob")
    answered = ask(rag, "how do I limit memory?", conversation, user="bob")
    assert answered.answer.startswith("As you said, your nodes are ARM64.\n\n")
    assert "[resources-and-limits.md#" in answered.answer and not MEMORY_ID.search(answered.answer)
    later = ask(rag, "how do I limit memory on linux?", conversation, user="bob")
    assert not later.answer.startswith("As you said") and not MEMORY_ID.search(later.answer)
    recap = ask(rag, "summarize our conversation", conversation, user="bob")
    assert "As you said" not in recap.answer and "ARM64" not in recap.answer


def test_a_statement_no_fact_rule_reads_is_said_back_in_the_users_words(rag: Anaphora) -> None:
    conversation = rag.new_conversation(user_id="carol")
    statement = "context: we're multi-tenant. tenant `payments` has to keep its buffers 90 days"
    ask(rag, statement, conversation, user="carol")
    answered = ask(rag, "how do I limit memory?", conversation, user="carol")
    assert answered.answer.startswith(f'As you said: "{statement.removeprefix("context: ")}"\n\n')


def test_a_message_sent_right_after_a_statement_is_answered_with_it(rag: Anaphora) -> None:
    """No settling between the turns: the next turn waits for the statement's memory write (read your writes)."""
    conversation = rag.new_conversation(user_id="dave")
    rag.ask("fyi all our nodes are ARM64", conversation, user_id="dave")
    answered = rag.ask("how do I limit memory?", conversation, user_id="dave")
    assert answered.answer.startswith("As you said, your nodes are ARM64.\n\n")
    assert any(s.name == "personal_query" and s.status == "ok" for s in answered.trace.stages)


def test_a_slow_memory_write_holds_the_next_turn_only_so_long(rag: Anaphora, monkeypatch) -> None:
    """A write that takes longer than the bound (a chat model extracting facts) is not waited for: the next turn
    goes on without what it has not written yet."""
    import asyncio

    from anaphora.pipeline import engine as engine_module

    writer = rag.components.engine.memory_writer
    write = writer.run

    async def slow(state):
        await asyncio.sleep(1.0)
        return await write(state)

    monkeypatch.setattr(writer, "run", slow)
    monkeypatch.setattr(engine_module, "READ_YOUR_WRITES_S", 0.05)
    conversation = rag.new_conversation(user_id="erin")
    rag.ask("fyi all our nodes are ARM64", conversation, user_id="erin")
    answered = rag.ask("how do I limit memory?", conversation, user_id="erin")
    assert not answered.answer.startswith("As you said")
    assert any(s.name == "personal_query" and s.status == "skipped" for s in answered.trace.stages)


def test_closeness_alone_leads_with_a_fact_only_when_the_question_asks_what_the_user_said(tmp_path) -> None:
    """With the similarity floor at its lowest, every fact is close enough: a question that only mentions the
    user's setup ("our IdP") and asks the documents gets no fact leading its answer, nor one made of it alone."""
    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        answer_mode="extractive",
        memory_fact_min_score=-1.0,
    )
    with Anaphora(settings, model=FakeChatModel()) as rag:
        rag.ingest([SAMPLE_DOCS])
        ask(rag, "I run Fluent Bit 2.1 on ARM64 nodes", rag.new_conversation(user_id="alice"))
        later = rag.new_conversation(user_id="alice")
        docs = ask(rag, "our IdP only speaks SAML. can it do SAML login?", later)
        assert not [m for m in docs.trace.memory if m.leads] and not MEMORY_ID.search(docs.answer)
        said = ask(rag, "which version did I say I run?", rag.new_conversation(user_id="alice"))
        assert [m.kind for m in said.trace.memory if m.leads] == ["fact"]
        # a question that names what it asks about is not answered by a close fact about something else
        other = ask(rag, "and which kestrel release did I say we are on?", rag.new_conversation(user_id="alice"))
        assert not [m for m in other.trace.memory if m.leads]
        assert other.answer == NOT_TOLD


# What the user said in an earlier conversation is context for a question about the documents, not its answer: it
# is quoted for a question about the user, or where no document answers; a question about something no document
# mentions is refused unless a memory names it; a fact the message states again is not said back.


def test_a_question_no_document_covers_is_not_answered_with_the_users_other_statements(rag: Anaphora) -> None:
    ask_anew(rag, "context: our Kestrel keeps its data on that one cluster")  # close to the question, word for word
    refused = ask_anew(rag, "could Kestrel keep its data in mongodb on that cluster?")
    assert refused.answer == f"{NOT_COVERED}: no page mentions mongodb."
    assert not [m for m in refused.trace.memory if m.injected]


def test_a_model_is_not_asked_either_when_no_document_covers_and_no_memory_names_it(tmp_path) -> None:
    """The same with a model answering (generate mode): nothing is shown, so the turn abstains without a call."""
    settings = Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", answer_mode="generate")
    model = FakeChatModel()
    with Anaphora(settings, model=model) as rag:
        rag.ingest([SAMPLE_DOCS])
        ask_anew(rag, "context: our Kestrel keeps its data on that one cluster")
        model.calls.clear()
        refused = ask_anew(rag, "could Kestrel keep its data in mongodb on that cluster?")
    assert refused.answer == f"{NOT_COVERED}: no page mentions mongodb." and not model.calls


def test_a_memory_that_names_what_no_document_mentions_may_answer(rag: Anaphora) -> None:
    ask_anew(rag, "context: our Kestrel archive lives in mongodb on the ARM64 cluster")
    answered = ask_anew(rag, "where did I say the Kestrel archive lives, mongodb?")
    assert "mongodb" in MEMORY_ID.sub("", answered.answer)
    assert [m for m in answered.trace.memory if m.injected and "mongodb" in m.text]


def test_beside_the_documents_a_statement_from_another_conversation_is_no_point_of_the_answer(rag: Anaphora) -> None:
    ask_anew(rag, "context: we install Kestrel on Kubernetes with the Helm chart, three replicas")
    answer = ask_anew(rag, "how do I install Kestrel on Kubernetes with the Helm chart?")
    assert answer.citations and not MEMORY_ID.search(answer.answer)
    assert "three replicas" not in answer.answer


def test_a_fact_the_message_states_again_is_not_said_back(rag: Anaphora) -> None:
    ask_anew(rag, "I run Kestrel 3.4.1 on ARM64 nodes")
    answer = ask_anew(rag, "running Kestrel 3.4.1 on ARM64 nodes. how do I upgrade my Kestrel with Helm?")
    assert not answer.answer.startswith("You run Kestrel 3.4.1")
    assert not [m for m in answer.trace.memory if m.leads]


def test_a_question_about_what_the_user_said_is_answered_by_their_own_words_when_no_fact_rule_read_them(
    tmp_path,
) -> None:
    """No fact rule reads "the control plane moved onto a GKE cluster"; the statement itself answers "where did I say
    our control plane runs?", in a later conversation, instead of "you haven't told me"."""
    settings = Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", answer_mode="extractive")
    with Anaphora(settings, model=FakeChatModel()) as rag:
        rag.ingest([SAMPLE_DOCS])
        ask(
            rag,
            "oh, update on our setup: we moved the control plane onto a GKE cluster",
            rag.new_conversation(user_id="bo"),
            "bo",
        )
        later = ask(rag, "where did I say our control plane runs these days?", rag.new_conversation(user_id="bo"), "bo")
        assert later.answer != NOT_TOLD and "GKE cluster" in later.answer
        assert [m.kind for m in later.trace.memory if m.leads] == ["episode"]
        other = ask(rag, "which database did I say we use?", rag.new_conversation(user_id="bo"), "bo")
        assert other.answer == NOT_TOLD  # the statement names no database
        # a shared word ("cluster") is no answer to the version of something else
        version = ask(rag, "which postgres version does our cluster run?", rag.new_conversation(user_id="bo"), "bo")
        assert version.answer == NOT_TOLD


def test_what_the_facts_leave_unsaid_comes_in_the_users_own_words(rag: Anaphora) -> None:
    """ "What queue and kestrel version do you have on file for us?": a fact answers the version, the queue is only in
    a statement no fact rule read; both are said back, and nothing from the documents. Our own phrasing."""
    ask_anew(rag, "context: we are on kestrel 3.2, and the spool lives on an NFS share", user="erin")
    ask_anew(rag, "we run kestrel 3.4 now", user="erin")
    answered = ask_anew(rag, "quick check: what spool and kestrel version do you have on file for us?", user="erin")
    assert "3.4" in answered.answer and "NFS" in answered.answer
    assert "[memory:" in answered.answer and ".md#" not in answered.answer


def test_what_the_user_said_earlier_in_this_conversation_answers_a_question_about_it(rag: Anaphora) -> None:
    """Flask's docs, read as a user: "fyi we deploy on a Debian VM behind nginx, with Python 3.12", a question, then
    "which python version do we run?" in the same conversation was "you haven't told me": the statement was still in
    the prompt's history, so memory left it out. Said back in the user's words, without the "fyi"."""
    conversation = rag.new_conversation(user_id="cy")
    ask(rag, "fyi we deploy on a Debian VM behind nginx, with Python 3.12", conversation, "cy")
    ask(rag, "how do I upgrade?", conversation, "cy")
    answered = ask(rag, "which python version do we run?", conversation, "cy")
    assert answered.answer.startswith('You said: "we deploy on a Debian VM behind nginx, with Python 3.12".')
    # a question that does not ask what the user said still leaves the prompt's own turns out of memory
    other = ask(rag, "how do I configure the retention period?", conversation, "cy")
    assert not [m for m in other.trace.memory if m.conversation_id == conversation and m.kind == "episode"]


def test_a_statement_is_said_back_only_where_it_bears_on_the_turn(rag: Anaphora) -> None:
    """Flask's docs, read as a user: "we use pytest btw", then "how do I make a custom 404 page?" opened with "As you
    said, you use pytest." The line is kept when the question speaks of the user's own or points back, or when the
    answer names what the statement names."""
    conversation = rag.new_conversation(user_id="di")
    ask(rag, "we use pytest btw", conversation, "di")
    unrelated = ask(rag, "how do I set the log level?", conversation, "di")
    assert unrelated.answer and not unrelated.answer.startswith("As you said")
    ask(rag, "we use pytest btw", conversation, "di")
    own = ask(rag, "which log level should our agents use?", conversation, "di")
    assert own.answer.startswith("As you said, you use pytest.")
