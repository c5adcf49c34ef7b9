"""The coverage check: a question naming a word no passage uses, and rare in English, is one the docs do not cover."""

from __future__ import annotations

import pytest

from anaphora.reading.coverage import asks, not_covered, rare, shared_name, unused_words
from anaphora.types import Passage

pytestmark = pytest.mark.unit


class Frequencies:
    """Document frequencies of a tiny corpus, as the lexical index reports them."""

    passages = 100

    def __init__(self, known: set[str]) -> None:
        self.known = known

    def document_frequencies(self, tokens: list[str]) -> dict[str, int]:
        return {t: 3 for t in tokens if t in self.known}

    def feedback(self, query_tokens, tokens, depth):  # pragma: no cover - not used here
        return {}


CORPUS = Frequencies({"forward", "reject", "line", "loki", "metric", "backend", "prometheus"})


def test_unused_words_are_those_no_passage_has() -> None:
    assert unused_words("could loki forward rejected lines to splunk?", CORPUS) == ["splunk"]


def test_only_rare_words_count_and_only_in_questions() -> None:
    assert rare("splunk") and not rare("tuesday") and not rare("could")
    far = [Passage(id="a#1", text="Prometheus metrics backend.", dense_score=0.4)]
    assert not_covered("could loki forward rejected lines to splunk?", far, CORPUS, close=0.8) == ["splunk"]
    assert not_covered("loki forwards rejected lines to splunk", far, CORPUS, close=0.8) == []  # a statement
    assert not asks("we use splunk") and asks("does it speak splunk")


def test_a_close_passage_means_the_page_was_found() -> None:
    near = [Passage(id="a#1", text="Forwarding to Splunk.", dense_score=0.85)]
    assert not_covered("could loki forward rejected lines to splunk?", near, CORPUS, close=0.8) == []


def test_without_statistics_nothing_is_refused() -> None:
    assert not_covered("could it forward to splunk?", [], None, close=0.8) == []


@pytest.mark.parametrize(
    ("question", "missing"),
    [
        ("could the results go to a Mongo Atlas cluster instead?", ["Mongo Atlas"]),
        ("Can Prometheus Pushgateway scrape it?", ["Prometheus Pushgateway"]),  # the opening "Can" is no name
        ("Can Loki forward rejected lines?", []),  # a sentence's first word and one name
        ("does the Prometheus metrics backend work with it?", []),  # one capitalised word: the word check's
        ("could I push the metrics to the Prometheus Backend?", []),  # the phrase is there, in any case
        ("we moved to Mongo Atlas last year", []),  # a statement asks nothing
    ],
)
def test_a_name_of_several_words_no_passage_found_holds_is_not_covered(question: str, missing: list[str]) -> None:
    """Each word can be in the corpus ("prometheus", "cluster") while the thing they name together is on no page
    the search found; then the question is refused however close the pages found are."""
    close = [Passage(id="a#1", text="Loki sends metrics to the Prometheus  backend.", dense_score=0.9)]
    assert not_covered(question, close, CORPUS, close=0.8) == missing


def test_an_acronym_beside_a_name_is_no_name_of_several_words() -> None:
    close = [Passage(id="a#1", text="Install it on Linux. ARM builds exist.", dense_score=0.9)]
    assert not_covered("How do I install Kestrel on Linux ARM?", close, CORPUS, close=0.8) == []


@pytest.mark.parametrize("word", ["misbehaves", "flushes", "retried", "throttling", "batches"])
def test_an_inflected_everyday_word_is_as_common_as_its_word(word: str) -> None:
    assert not rare(word)


@pytest.mark.parametrize("word", ["splunks", "kerberos", "mqtt", "deployctl"])
def test_a_rare_name_stays_rare_whatever_its_ending(word: str) -> None:
    assert rare(word)


@pytest.mark.parametrize(
    "question",
    [
        "can I deploy the app on nomad?",  # an orchestrator no page names, lowercase: not rare in English
        "could rejected lines go to kafka instead?",
        "is there a lambda layer for it?",
    ],
)
def test_a_name_other_languages_write_too_is_a_subject_the_docs_do_not_cover(question: str) -> None:
    """Held-out sets asked for "a job file for an orchestrator the docs never name"; written in lower case, "nomad"
    (Zipf 3.07) is neither rare in English nor written as a name. German and French text use it as often: it names
    a thing of the world, not a word of English."""
    far = [Passage(id="a#1", text="Prometheus metrics backend.", dense_score=0.4)]
    assert not_covered(question, far, CORPUS, close=0.8)


@pytest.mark.parametrize("word", ["doable", "weekday", "cranking", "cleanest", "hoards", "tuesday", "stuff", "on-prem"])
def test_a_word_of_english_only_or_common_in_english_is_no_shared_name(word: str) -> None:
    """Everyday English the docs happen not to use ("is that doable?", "every weekday") names no subject; a compound
    is measured by its parts ("on", "prem"), so it never counts."""
    assert not shared_name(word)


@pytest.mark.parametrize(
    ("question", "text", "missing"),
    [
        ("does it support http/2?", "Parse HTTP headers and serve HTTP/1.1 with the development server.", ["http/2"]),
        ("does it support HTTP/2?", "The entry point speaks HTTP/2 and HTTP/1.1.", []),
        ("can the backend talk HTTP/2 too?", "Enable http2 on the backend connection.", []),
        ("is HTTP/1 supported?", "It serves HTTP/1.1 only.", []),  # a version said more precisely
    ],
)
def test_a_protocol_version_no_passage_found_says_is_not_covered(question: str, text: str, missing: list[str]) -> None:
    """Werkzeug's docs never mention HTTP/2, yet every word of "does werkzeug support http/2?" is in the index
    ("http", "2"): its answer quoted passages about HTTP headers. The version is looked for as written, or joined."""
    close = [Passage(id="a#1", text=text, dense_score=0.9)]
    assert not_covered(question, close, CORPUS, close=0.8) == missing
