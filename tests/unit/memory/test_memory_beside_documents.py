"""What the user said in an earlier conversation is context for a question about the documents, not its answer:
it is quoted for a question about the user, or where no document answers; a question about something no document
mentions is refused unless a memory names it; a fact the message states again is not said back. Through the library
with the shipped fakes, in the extractive mode (no model call)."""

from __future__ import annotations

import re

import pytest

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.pipeline.check import ABSTAIN
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


def ask(rag: Anaphora, question: str, user: str = "alice"):
    result = rag.ask(question, rag.new_conversation(user_id=user), user_id=user)
    rag.settle()  # the memory write runs after the answer, in the background
    return result


def test_a_question_no_document_covers_is_not_answered_with_the_users_other_statements(rag: Anaphora) -> None:
    ask(rag, "context: our Kestrel keeps its data on that one cluster")  # close to the question, word for word
    refused = ask(rag, "could Kestrel keep its data in mongodb on that cluster?")
    assert refused.answer == ABSTAIN
    assert not [m for m in refused.trace.memory if m.injected]


def test_a_memory_that_names_what_no_document_mentions_may_answer(rag: Anaphora) -> None:
    ask(rag, "context: our Kestrel archive lives in mongodb on the ARM64 cluster")
    answered = ask(rag, "where did I say the Kestrel archive lives, mongodb?")
    assert "mongodb" in MEMORY_ID.sub("", answered.answer)
    assert [m for m in answered.trace.memory if m.injected and "mongodb" in m.text]


def test_beside_the_documents_a_statement_from_another_conversation_is_no_point_of_the_answer(rag: Anaphora) -> None:
    ask(rag, "context: we install Kestrel on Kubernetes with the Helm chart, three replicas")
    answer = ask(rag, "how do I install Kestrel on Kubernetes with the Helm chart?")
    assert answer.citations and not MEMORY_ID.search(answer.answer)
    assert "three replicas" not in answer.answer


def test_a_fact_the_message_states_again_is_not_said_back(rag: Anaphora) -> None:
    ask(rag, "I run Kestrel 3.4.1 on ARM64 nodes")
    answer = ask(rag, "running Kestrel 3.4.1 on ARM64 nodes. how do I upgrade my Kestrel with Helm?")
    assert not answer.answer.startswith("You run Kestrel 3.4.1")
    assert not [m for m in answer.trace.memory if m.leads]
