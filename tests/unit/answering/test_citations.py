"""Citations: ids the model wrote in brackets, else attribution of answer sentences by word overlap."""

from __future__ import annotations

import pytest

from anaphora.answering.citations import attributed_ids, cited_ids, extract_citations
from anaphora.types import Citation, Passage

pytestmark = pytest.mark.unit

KNOWN = ["a", "b", "c", "install.md#2", "guide/setup.md#10"]


# --- cited_ids ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Run the installer [a].", ["a"]),
        ("Both say so [a, b].", ["a", "b"]),
        ("Both say so [a,b;c].", ["a", "b", "c"]),
        ("Adjacent [a][b] brackets.", ["a", "b"]),
        ("With a label [id: a] and [ID:b].", ["a", "b"]),
        ("Labels in a list [id: a, id: c].", ["a", "c"]),
        ("Quoted [`a`] and ['b'] and [\"c\"].", ["a", "b", "c"]),
        ("Padded [ a ] and [  b ,  c  ].", ["a", "b", "c"]),
        ("Path ids [install.md#2] and [guide/setup.md#10].", ["install.md#2", "guide/setup.md#10"]),
        ("Order of first mention: [c] then [a] then [b].", ["c", "a", "b"]),
        ("Nested [[b]] brackets.", ["b"]),
    ],
)
def test_cited_ids_forms(answer: str, expected: list[str]) -> None:
    assert cited_ids(answer, KNOWN) == expected


@pytest.mark.parametrize(
    "answer",
    [
        "No citations at all.",
        "Unknown ids [zzz] and [1] and [install.md#3].",
        "Markdown list [ ] and empty [].",
        "Case matters [A] [Install.md#2].",
        "A bracket split over lines [a\n].",
        "Partial [ab] [a b] [id a].",
    ],
)
def test_cited_ids_ignores_unknown(answer: str) -> None:
    assert cited_ids(answer, KNOWN) == []


def test_cited_ids_dedups_and_keeps_first_order() -> None:
    answer = "First [b]. Then [a, b]. Again [b][a] and [id: a; b]."
    assert cited_ids(answer, KNOWN) == ["b", "a"]


def test_cited_ids_mixes_known_and_unknown() -> None:
    assert cited_ids("See [x, a, y] and [nope][c].", KNOWN) == ["a", "c"]


def test_cited_ids_allows_spaces_in_ids() -> None:
    assert cited_ids("From [my notes.md#1].", ["my notes.md#1"]) == ["my notes.md#1"]


def test_cited_ids_with_comma_in_id() -> None:
    assert cited_ids("From [notes, 2024.md#1].", ["notes, 2024.md#1"]) == ["notes, 2024.md#1"]


def test_cited_ids_with_no_known_ids() -> None:
    assert cited_ids("[a] [b]", []) == []


# --- attributed_ids -----------------------------------------------------------------------------------------

ZOO = Passage(id="zoo#1", text="The zebra stood near the quartz violin.", source="zoo.md", heading="Animals")
PORT = Passage(id="port#1", text="Tulips bloomed by the harbor lighthouse beacon.", source="port.md")
FRUIT = Passage(id="fruit#1", text="Bananas are yellow and rich in potassium.", source="fruit.md", heading="Food")


def test_attributed_picks_passage_containing_the_sentence_words() -> None:
    answer = "Bananas are rich in potassium and yellow."
    assert attributed_ids(answer, [ZOO, PORT, FRUIT]) == ["fruit#1"]


def test_attributed_handles_several_sentences_in_order_and_dedups() -> None:
    answer = (
        "The harbor lighthouse beacon shone over tulips. "
        "A zebra stood near a quartz violin! "
        "Tulips bloomed near the harbor beacon?\n"
        "Yellow bananas have potassium."
    )
    assert attributed_ids(answer, [ZOO, PORT, FRUIT]) == ["port#1", "zoo#1", "fruit#1"]


def test_attributed_ignores_short_sentences_even_with_full_overlap() -> None:
    # two content words, both in FRUIT: too short to attribute
    assert attributed_ids("Bananas potassium.", [FRUIT]) == []
    assert attributed_ids("Yes. Bananas potassium. Okay!", [FRUIT]) == []
    # three content words is enough
    assert attributed_ids("Bananas potassium yellow.", [FRUIT]) == ["fruit#1"]


def test_attributed_threshold_is_sixty_percent() -> None:
    passage = Passage(id="p", text="zebra quartz violin")
    assert attributed_ids("zebra quartz violin harbor tulip.", [passage]) == ["p"]  # 3/5
    assert attributed_ids("zebra quartz lemon harbor tulip.", [passage]) == []  # 2/5


def test_attributed_uses_the_heading_too() -> None:
    passage = Passage(id="h", text="quartz violin", heading="Zebra")
    assert attributed_ids("The zebra has a quartz violin.", [passage]) == ["h"]


def test_attributed_matches_stems_and_ignores_stopwords() -> None:
    passage = Passage(id="s", text="Installing requires configuring the servers.")
    assert attributed_ids("It is the installation that required a configured server.", [passage]) == ["s"]


def test_attributed_unrelated_answer_and_no_passages() -> None:
    assert attributed_ids("Completely different words appear here today.", [ZOO, PORT, FRUIT]) == []
    assert attributed_ids("Bananas are rich in potassium and yellow.", []) == []
    assert attributed_ids("", [FRUIT]) == []


def test_attributed_prefers_the_best_passage() -> None:
    partial = Passage(id="partial", text="bananas yellow")
    assert attributed_ids("Bananas are yellow and rich in potassium.", [partial, FRUIT]) == ["fruit#1"]


# --- extract_citations --------------------------------------------------------------------------------------


def test_extract_citations_cited() -> None:
    answer = "Bananas are yellow [fruit#1] and zebras exist [zoo#1][fruit#1]."
    citations = extract_citations(answer, [ZOO, PORT, FRUIT])
    assert citations == [
        Citation(id="fruit#1", source="fruit.md", heading="Food", how="cited"),
        Citation(id="zoo#1", source="zoo.md", heading="Animals", how="cited"),
    ]


def test_extract_citations_cited_wins_over_attribution() -> None:
    # the sentence would attribute to FRUIT, but the model cited PORT: the citation is what counts
    citations = extract_citations("Bananas are rich in potassium and yellow [port#1].", [ZOO, PORT, FRUIT])
    assert [(c.id, c.how) for c in citations] == [("port#1", "cited")]


def test_extract_citations_attributed_when_nothing_cited() -> None:
    citations = extract_citations("Bananas are rich in potassium and yellow.", [ZOO, PORT, FRUIT])
    assert citations == [Citation(id="fruit#1", source="fruit.md", heading="Food", how="attributed")]


def test_extract_citations_unknown_ids_fall_back_to_attribution() -> None:
    citations = extract_citations("A zebra stood near a quartz violin [made-up#9].", [ZOO, PORT, FRUIT])
    assert [(c.id, c.how, c.source) for c in citations] == [("zoo#1", "attributed", "zoo.md")]


def test_extract_citations_nothing() -> None:
    assert extract_citations("I do not know.", [ZOO, PORT, FRUIT]) == []
    assert extract_citations("Anything [a].", []) == []
