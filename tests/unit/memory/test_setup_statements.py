"""Statements of the user's setup without a first person ("the cluster runs Fluent Bit 2.1 on ARM64", "our nodes
are ARM64", "running k8s 1.29") are facts; questions and what documents or examples say are not. Rules only (the
embedded model is too weak to extract facts); through the real writer and SQLite store for the updates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.memory.sqlite_store import SQLiteMemoryStore
from anaphora.memory.writer import TurnRecorder, TurnToRemember
from anaphora.reading.extract import extract_facts
from anaphora.reading.personal import acknowledgement, states_about_user
from anaphora.store import Database

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("message", "attribute", "value"),
    [
        ("the cluster runs Fluent Bit 2.1 on ARM64", "uses fluent", "Fluent Bit 2.1 on ARM64"),
        ("our nodes are ARM64", "nodes", "ARM64"),
        ("the nodes are ARM64", "nodes", "ARM64"),
        ("all our docker hosts are ARM64 (graviton boxes)", "docker hosts", "ARM64 (graviton boxes)"),
        ("running k8s 1.29", "uses k8s", "k8s 1.29"),
        ("using Loki 3.0 in microservices mode", "uses loki", "Loki 3.0 in microservices mode"),
        ("on k8s 1.29 here", "uses k8s", "k8s 1.29"),
        ("the cluster is on k8s 1.29", "uses k8s", "k8s 1.29"),
        ("prod uses Postgres 16", "uses postgres", "Postgres 16"),
        ("the cluster has 3 nodes", "cluster has", "3 nodes"),
        ("traefik sits behind an AWS NLB", "traefik sits behind", "AWS NLB"),
        ("the NLB has proxy protocol v2 enabled", "nlb has", "proxy protocol v2 enabled"),
        ("the NLB has proxy protocol v2 switched on", "nlb has", "proxy protocol v2 switched on"),  # a particle
        ("our DNS is hosted on cloudflare btw", "dns is hosted on", "cloudflare"),
        ("setup: loki 3.x in microservices mode on k8s", "setup loki", "loki 3.x in microservices mode on k8s"),
        ("ok so, the workers run Alloy v1.4", "uses alloy", "Alloy v1.4"),
        ("i should've said: this is docker swarm, not plain compose", "setup", "docker swarm"),
    ],
)
def test_a_setup_stated_without_a_first_person_is_a_fact(message: str, attribute: str, value: str) -> None:
    facts = extract_facts(message)
    assert (attribute, value) in [(f.attribute, f.value) for f in facts]
    assert states_about_user(message, facts)  # acknowledged, not answered from the documents


def test_each_part_under_a_marker_is_a_statement() -> None:
    facts = extract_facts("context: small platform team, maybe 10GB of logs a day, everything lives on one GKE cluster")
    assert [(f.attribute, f.value) for f in facts] == [
        ("setup 10gb", "10GB of logs a day"),
        ("setup lives on", "one GKE cluster"),
    ]
    assert "Your setup lives on one GKE cluster" in acknowledgement(facts, remembered=True).replace("your", "Your")


def test_a_value_cut_at_the_word_limit_does_not_end_mid_phrase() -> None:
    facts = extract_facts("we run traefik v3 as a plain binary on a VM with the file provider")
    assert [f.value for f in facts] == ["traefik v3 as a plain binary on a VM"]


def test_we_are_on_a_bare_version_is_a_fact() -> None:
    assert [(f.attribute, f.value) for f in extract_facts("we're on 3.2 now")] == [("uses 3.2", "3.2")]


@pytest.mark.parametrize(
    "message",
    [
        "does the cluster run Fluent Bit 2.1?",
        "which nodes are ARM64?",
        "is the cluster running k8s 1.29 supported",
        "if the cluster runs k8s 1.29, what changes",
        "how do I run Fluent Bit 2.1 on ARM64?",
        "should we use Loki 3.0",
        "we want to run Loki 3.0 on the nodes",
        "the docs say the ingester runs on port 3100",
        "the example uses Fluent Bit 2.1",
        "the ingester uses 4GB by default",
        "the default is 4GB",
        "according to the guide the cluster runs Loki 3.0",
        "Loki 3.0 runs on ARM64",
        "the compactor runs every 10 minutes",
        "running the compactor with retention_enabled deletes chunks",
        "running helm install fails with an error",
        "the pod runs OOM after an hour",
        "the nodes are running out of memory",
        "the cluster is slow",
        "The Loki ruler has 3 replicas",  # a thing named without digits or capitals is no subject of its own
        "ok so what would the config look like for that?",
    ],
)
def test_questions_documents_and_trouble_are_no_facts(message: str) -> None:
    assert extract_facts(message) == []
    assert not states_about_user(message, [])


@pytest.mark.parametrize(
    "message",
    [
        "we run 3 replicas, can all of them do rolling upgrades",
        "our ingesters use the WAL on local disk, how do we scale them down",
        "we are on loki 2.9; is the OTLP endpoint there",
    ],
)
def test_a_later_clause_that_asks_makes_a_question_without_a_question_mark(message: str) -> None:
    """Typed without "?", the setup is context for a question: answered from the documents, not acknowledged."""
    assert not states_about_user(message, extract_facts(message))


@pytest.mark.parametrize(
    "message",
    [
        "for background: our team has about 40 services behind nginx",
        "quick note - we deploy with argo cd",
        "some context first: we migrated from jenkins last year",
        "info for later: the cluster name is blue-prod",
        "keep in mind our firewall blocks outbound traffic except 443",
        "for reference, we push about 2TB of logs per day",
        "fwiw we keep our staging and prod clusters in separate accounts",
    ],
)
def test_a_statement_under_a_label_or_a_marker_is_a_statement(message: str) -> None:
    """A short label ("the setup:", "info for later:") or a marker ("keep in mind", "for reference") before what the
    user says of themselves or what something is: context, acknowledged rather than searched."""
    assert states_about_user(message, extract_facts(message))


@pytest.mark.parametrize(
    "message",
    [
        "different problem: someone logged emails into the checkout app last tuesday",
        "logql question: i want lines from nginx that mention timeout",
        "next: the same thing for the staging cluster",
        "separately: only our office range 203.0.113.0/24 should be able to reach /admin",
        "different thing: I'd like a Tests tab that shows failures from all our jobs",
    ],
)
def test_a_label_before_a_problem_a_wish_or_a_request_is_no_statement(message: str) -> None:
    """A label that names a problem or a question, or what follows it wants something done: answered."""
    assert not states_about_user(message, extract_facts(message))


@pytest.mark.parametrize("message", ["we run loki 3.x, which is the latest", "fyi: we run 3 ingesters. all ARM64"])
def test_a_relative_clause_or_a_second_statement_is_still_a_statement(message: str) -> None:
    assert states_about_user(message, extract_facts(message))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteMemoryStore]:
    database = Database(tmp_path / "memory.db")
    yield SQLiteMemoryStore(database)
    database.close()


async def current_after(store, *messages: str) -> dict[str, str]:
    recorder = TurnRecorder(store, HashingEmbedder(384))
    for n, message in enumerate(messages):
        await recorder.record(TurnToRemember("alice", f"c{n}", 0, message, 1_700_000_000.0 + n * 86400))
    facts = (await store.list("alice", kind="fact")).items
    return {f.attribute: f.value for f in facts if f.current}


@pytest.mark.parametrize(
    ("first", "update", "expected"),
    [
        ("the cluster runs Fluent Bit 2.1 on ARM64", "we're on 3.2 now", {"uses fluent": "Fluent Bit 3.2 on ARM64"}),
        ("running k8s 1.29", "the cluster is on k8s 1.30", {"uses k8s": "k8s 1.30"}),
        ("our nodes are ARM64", "the nodes are x86 now", {"nodes": "x86"}),
    ],
)
async def test_a_setup_statement_supersedes_like_a_first_person_one(store, first, update, expected) -> None:
    assert await current_after(store, first, update) == expected


def test_the_acknowledgement_reads_as_one_sentence_in_the_users_case() -> None:
    facts = extract_facts("traefik sits behind an AWS NLB, and the NLB has proxy protocol v2 enabled")
    assert acknowledgement(facts, remembered=True) == (
        "Noted: your traefik sits behind an AWS NLB; your NLB has proxy protocol v2 enabled. I'll remember that."
    )
    (dns,) = extract_facts("our DNS is hosted on cloudflare btw")  # one fact, though two rules read it
    assert dns.text == "the user's DNS is hosted on cloudflare"


@pytest.mark.parametrize(
    ("message", "value", "said_back"),
    [
        ("our ingesters are a StatefulSet with 3 replicas", "StatefulSet with 3 replicas", "a StatefulSet"),
        ("traefik sits behind an AWS NLB", "AWS NLB", "an AWS NLB"),
        ("we run the Loki helm chart 6.2", "Loki helm chart 6.2", "the Loki helm chart 6.2"),
        ("our nodes are ARM64", "ARM64", "are ARM64"),  # no article written, none added
    ],
)
def test_a_fact_is_said_back_with_the_article_the_user_wrote(message: str, value: str, said_back: str) -> None:
    """The value goes without its article (values are compared), the fact's text keeps it: "your ingesters are a
    StatefulSet ...", not "are StatefulSet ..."."""
    (fact,) = [f for f in extract_facts(message) if f.value == value]
    assert said_back in fact.text
    assert said_back in acknowledgement([fact], remembered=True)


@pytest.mark.parametrize(
    ("statement", "said"),
    [
        ("before we start: our workers run on Kubernetes", "our workers run on Kubernetes"),
        ("fyi, all our hosts are ARM64", "all our hosts are ARM64"),
        ("keep in mind our firewall blocks outbound traffic", "our firewall blocks outbound traffic"),
        ("we run loki 3 on two VMs", "we run loki 3 on two VMs"),
        # a marker, then a label
        ("a bit of background before my question: we're on k3s", "we're on k3s"),
        ("context:", "context:"),  # nothing after it: the message itself
    ],
)
def test_a_statement_is_searched_with_and_said_back_without_its_label(statement: str, said: str) -> None:
    """The label says how the user introduced it, not what they said: "before we start" would pull every passage
    about starting something into the later queries."""
    from anaphora.reading.personal import without_label

    assert without_label(statement) == said
