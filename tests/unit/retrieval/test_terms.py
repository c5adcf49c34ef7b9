"""Expansion-term selection by corpus statistics, on small synthetic corpora."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anaphora.pipeline.rewrite import HistoryExpansion
from anaphora.retrieval.bm25 import BM25Index
from anaphora.retrieval.terms import (
    GENERIC_BELOW,
    disambiguating,
    generic,
    on_topic,
    specificity,
    word_specificity,
)
from anaphora.types import Message

pytestmark = pytest.mark.unit


def cloud_docs(n: int = 100) -> BM25Index:
    """Every passage says "service" and "console"; "instance" is in half; each product name is in two passages."""
    texts = []
    for i in range(n):
        product = f"prod{i // 2:03d}x"
        extra = " instance" if i % 2 else ""
        texts.append(f"the service console shows {product} settings{extra}")
    return BM25Index.build(np.arange(n), texts)


def test_specificity_is_the_share_of_the_largest_idf():
    assert specificity(1, 10_000) == pytest.approx(1.0)
    assert specificity(10_000, 10_000) == 0.0
    assert specificity(100, 10_000) == pytest.approx(0.5)
    assert specificity(1585, 10_000) == pytest.approx(0.2, abs=1e-3)  # N^0.8: the generic line
    assert specificity(40, 100) == pytest.approx(0.199, abs=1e-3)
    assert specificity(0, 100) == 0.0  # a word no passage has selects nothing
    assert specificity(5, 1) == 0.0


def test_document_frequencies_from_the_bm25_index():
    index = cloud_docs()
    frequencies = index.document_frequencies(["servic", "instanc", "prod007x", "nowher"])
    assert frequencies == {"servic": 100, "instanc": 50, "prod007x": 2, "nowher": 0}
    assert index.passages == 100


def test_generic_vocabulary_carries_no_weight():
    index = cloud_docs()
    scores = word_specificity(["service", "Instances", "prod007x", "kubernetes"], index)
    assert scores["service"] == 0.0
    assert scores["Instances"] == pytest.approx(math.log(2) / math.log(100))
    assert scores["prod007x"] == pytest.approx(math.log(50) / math.log(100))
    assert scores["kubernetes"] == 0.0  # absent from this corpus
    assert disambiguating(["service", "Instances", "prod007x", "kubernetes", "console"], index) == ["prod007x"]


def test_generic_words_are_those_the_corpus_uses_everywhere():
    """Not the rare ones, nor those no passage uses (unknown is not everyday), nor stop-words."""
    words = ["the", "service", "Instances", "prod007x", "kubernetes", "console"]
    assert generic(words, cloud_docs()) == ["service", "Instances", "console"]  # half of 100 is over N^0.8
    assert generic(words, None) == []


def test_without_statistics_every_word_is_kept():
    assert disambiguating(["service", "console"], None) == ["service", "console"]


def test_the_same_word_is_generic_in_one_corpus_and_specific_in_another():
    """Nothing is tuned to a domain: "service" disambiguates where few passages say it."""
    texts = [f"passage {i} about topic{i}" for i in range(99)] + ["the service desk opens at nine"]
    wiki = BM25Index.build(np.arange(100), texts)
    assert disambiguating(["service"], wiki) == ["service"]
    assert disambiguating(["service"], cloud_docs()) == []
    assert word_specificity(["service"], wiki)["service"] > GENERIC_BELOW


def test_history_expansion_drops_generic_history_words():
    index = cloud_docs()
    history = [
        Message(role="user", content="How do I open the service console for prod007x instances?"),
        Message(role="assistant", content="Open it from the console menu."),
    ]
    plain = HistoryExpansion().expand("And the pricing of it?", history)
    selected = HistoryExpansion(statistics=lambda: index).expand("And the pricing of it?", history)
    assert plain == ("And the pricing of it? open service console prod007x instances", True)
    assert selected == ("And the pricing of it? prod007x", True)


def test_history_expansion_with_only_generic_words_leaves_the_message_alone():
    index = cloud_docs()
    history = [Message(role="user", content="Where is the service console?")]
    assert HistoryExpansion(statistics=lambda: index).expand("And for it?", history) == ("And for it?", False)


def test_standalone_message_is_never_expanded_even_with_statistics():
    index = cloud_docs()
    history = [Message(role="user", content="prod007x settings")]
    question = "Which settings does prod003x show on the console?"
    assert HistoryExpansion(statistics=lambda: index).expand(question, history) == (question, False)


def test_a_short_message_naming_something_specific_stands_alone():
    """A message like "What is prod007x?" has one content word, but it singles out two passages of a hundred: no
    earlier turn is needed to say what it is about. A short message made of generic words, or one that refers back,
    does not."""
    index = cloud_docs()
    history = [Message(role="user", content="How do I open the service console?")]
    expansion = HistoryExpansion(statistics=lambda: index)
    assert expansion.stands_alone("What is prod007x?")
    assert expansion.expand("What is prod007x?", history) == ("What is prod007x?", False)
    assert not expansion.stands_alone("What about the instances?")  # continues the conversation
    assert not expansion.stands_alone("Is prod007x in it?")  # refers back
    assert not expansion.stands_alone("Which instance?")  # generic here: half the passages say it
    assert expansion.stands_alone("What is kubernetes?")  # no passage says it: not this corpus's vocabulary
    assert expansion.stands_alone("What is prod007x and why is it slow?")  # "it" is the prod007x just named
    assert not expansion.stands_alone("Why is it slow on prod007x?")  # "it" comes first: something earlier
    assert not HistoryExpansion().stands_alone("What is prod007x?")  # without statistics, word count decides


def history_docs() -> BM25Index:
    """Twelve passages on the Byzantine empire; "thanks" and "clarifying" only in passages on other things."""
    texts = [f"the eastern roman empire was called byzantine by later historians, note {i}" for i in range(12)]
    texts += [f"the byzantine capital constantinople, part {i}" for i in range(4)]
    texts += [f"thanks to the gardeners of plot {i}" for i in range(3)]
    texts += [f"clarifying butter in pan {i}" for i in range(2)]
    texts += [f"filler passage {i} about gardening and tomatoes" for i in range(79)]
    return BM25Index.build(np.arange(len(texts)), texts)


def test_feedback_counts_each_token_in_the_passages_a_query_finds():
    index = history_docs()
    support = index.feedback(["byzantin", "empir"], ["byzantin", "roman", "constantinopl", "thank", "nowher"], 10)
    assert support == {"byzantin": 10, "roman": 10, "constantinopl": 0, "thank": 0, "nowher": 0}
    assert index.feedback(["nowher"], ["byzantin"], 10) == {"byzantin": 0}  # the query finds nothing
    assert index.search("byzantine empire", 3) == [(k, s) for k, s in index.search("byzantine empire", 10)[:3]]


def test_only_words_that_co_occur_with_the_conversations_topic_join_the_expansion():
    """The talk around a topic ("thanks for clarifying") is specific in the corpus, but no passage of the topic
    has it."""
    index = history_docs()
    words = ["Thanks", "clarifying", "eastern", "Roman", "empire", "Byzantine"]
    assert disambiguating(words, index) == words
    assert on_topic(words, index) == ["eastern", "Roman", "empire", "Byzantine"]
    assert on_topic(words, None) == words
    history = [
        Message(role="user", content="Thanks for clarifying. What was the eastern Roman empire called?"),
        Message(role="assistant", content="It was called the Byzantine empire."),
    ]
    query, expanded = HistoryExpansion(statistics=lambda: index).expand("Why did it fall?", history)
    assert expanded and query == "Why did it fall? eastern Roman empire called"  # not "Thanks clarifying"


def parser_docs() -> BM25Index:
    """A small docs site: multiline parsing pages (which also speak of the flush timeout of a partial record), output
    pages with TLS, and filler pages."""
    texts = [
        "the multiline parser joins continuation lines into one record",
        "multiline parser flush_timeout: a partial record is flushed after the timeout",
        "configure the multiline parser with a start state regex and a cont state",
        "the http output sends records to an endpoint; enable tls with tls on and tls.verify",
        "the forward output can use tls certificates for the connection",
    ] + [f"filler page {i} about buffering and storage of chunk {i}" for i in range(40)]
    return BM25Index.build(np.arange(len(texts)), texts)


def test_a_follow_up_that_names_no_new_subject_keeps_the_topic():
    """A complete-looking question stays on the conversation's topic when what it names is on the pages of that
    topic ("timeout", "flushed" after multiline parsing), and leaves it when it names what the topic's pages do not
    (TLS). The user's own paraphrases, not a benchmark's."""
    index = parser_docs()
    expansion = HistoryExpansion(statistics=lambda: index)
    history = [
        Message(role="user", content="how do I set up the multiline parser for stack traces?"),
        Message(role="assistant", content="Configure a start state regex and a continuation state."),
    ]
    for message in (
        "is there a timeout before a partial record is flushed?",
        "does a partial record ever get flushed on a timeout?",
        "what about the continuation state regex?",
    ):
        assert not expansion.stands_alone(message, history), message
    for message in ("how do I enable tls on the http output?", "can the forward output use tls certificates?"):
        assert expansion.stands_alone(message, history), message
    assert expansion.stands_alone("is there a timeout before a partial record is flushed?")  # turn 1: no topic


def test_a_pronoun_after_words_the_topic_already_named_still_points_back():
    """A word before the pronoun makes the message stand alone only when it names a new subject: "ok, a flush
    timeout then, what is it by default?" after multiline parsing is still about the parser; "the http output with
    tls: can it verify certificates?" is not (a new subject). Our own phrasings."""
    index = parser_docs()
    expansion = HistoryExpansion(statistics=lambda: index)
    history = [
        Message(role="user", content="how do I set up the multiline parser for stack traces?"),
        Message(role="assistant", content="Configure a start state regex and a continuation state."),
    ]
    assert not expansion.stands_alone("ok, a flush timeout then, what is it by default?", history)
    assert not expansion.stands_alone("great, the partial record: when does it get flushed?", history)
    assert not expansion.stands_alone("partial records, when are they flushed?", history)
    assert expansion.stands_alone("the http output with tls, can it verify certificates?", history)
    assert expansion.stands_alone("ok, a flush timeout then, what is it by default?")  # turn 1: named, no history
