"""Token-aware chunking: size limit, overlap, headings, long-unit splitting, code blocks."""

from __future__ import annotations

import itertools

import pytest

from anaphora.ingest.chunker import TextChunk, chunk_section, chunk_sections
from anaphora.ingest.parsers import Section

pytestmark = pytest.mark.unit


def words(text: str) -> int:
    """A word-count token counter: easy to reason about in assertions."""
    return len(text.split())


def sentence(label: str, n: int) -> str:
    """A sentence of exactly ``n`` words, starting with a capital so the sentence splitter sees its start."""
    assert n >= 2
    return " ".join([label.capitalize()] + [label.lower()] * (n - 2) + ["end."])


def test_chunks_respect_the_token_limit_without_overlap():
    lengths = [3, 7, 2, 9, 4, 4, 6, 2, 8, 5, 3, 10, 2]
    text = " ".join(sentence(f"S{i}x", n) for i, n in enumerate(lengths))
    chunks = chunk_section(Section(["H"], text), size=10, overlap=0, count=words)
    assert len(chunks) > 1
    for chunk in chunks:
        assert words(chunk.text) <= 10
        assert chunk.tokens == words(chunk.text)
    # Without overlap nothing is lost and nothing repeated: the chunks re-join to the original words.
    assert " ".join(c.text for c in chunks).split() == text.split()


def test_small_section_is_one_chunk():
    chunks = chunk_section(Section(["A", "B"], "One short. Two short."), size=50, overlap=10, count=words)
    assert chunks == [TextChunk("A > B", "One short.\nTwo short.", 4)]


def test_overlap_carries_trailing_sentences():
    sentences = [sentence(f"W{i}w", 5) for i in range(6)]
    chunks = chunk_section(Section([], " ".join(sentences)), size=12, overlap=5, count=words)
    texts = [c.text.split("\n") for c in chunks]
    # Two 5-word sentences fit in 12 tokens; the last one (5 tokens <= overlap) is carried into the next.
    assert texts == [
        [sentences[0], sentences[1]],
        [sentences[1], sentences[2]],
        [sentences[2], sentences[3]],
        [sentences[3], sentences[4]],
        [sentences[4], sentences[5]],
    ]
    for previous, current in itertools.pairwise(chunks):
        assert previous.text.split("\n")[-1] == current.text.split("\n")[0]


def test_overlap_is_bounded_by_overlap_tokens():
    sentences = [sentence(f"W{i}w", 4) for i in range(8)]
    chunks = chunk_section(Section([], " ".join(sentences)), size=12, overlap=4, count=words)
    for previous, current in itertools.pairwise(chunks):
        prev_units, cur_units = previous.text.split("\n"), current.text.split("\n")
        carried = [u for u in cur_units if u in prev_units]
        assert sum(words(u) for u in carried) <= 4
        assert carried == prev_units[-len(carried) :]
        assert carried, "a 4-token sentence fits the 4-token overlap, so one must be carried"


def test_zero_overlap_carries_nothing():
    sentences = [sentence(f"W{i}w", 5) for i in range(6)]
    chunks = chunk_section(Section([], " ".join(sentences)), size=12, overlap=0, count=words)
    units = [u for c in chunks for u in c.text.split("\n")]
    assert units == sentences


def test_overlap_never_pushes_a_chunk_over_the_limit():
    text = " ".join([sentence("Aa", 6), sentence("Bb", 5), sentence("Cc", 8)])
    chunks = chunk_section(Section([], text), size=10, overlap=5, count=words)
    assert all(words(c.text) <= 10 for c in chunks), [c.text for c in chunks]


def test_heading_kept_on_every_chunk():
    text = " ".join(sentence(f"Q{i}q", 6) for i in range(20))
    chunks = chunk_section(Section(["Guide", "Install", "Linux"], text), size=15, overlap=3, count=words)
    assert len(chunks) >= 5
    assert {c.heading for c in chunks} == {"Guide > Install > Linux"}


def test_chunks_never_span_sections():
    sections = [
        Section(["One"], "Alpha first. Alpha second."),
        Section(["Two"], "Beta first. Beta second."),
    ]
    chunks = chunk_sections(sections, size=100, overlap=10, count=words)
    assert [(c.heading, c.text) for c in chunks] == [
        ("One", "Alpha first.\nAlpha second."),
        ("Two", "Beta first.\nBeta second."),
    ]


def test_very_long_sentence_is_split_at_word_boundaries():
    long_sentence = " ".join(f"w{i}" for i in range(57)) + "."
    chunks = chunk_section(Section(["H"], long_sentence), size=10, overlap=0, count=words)
    assert len(chunks) == 6
    assert all(words(c.text) <= 10 for c in chunks)
    assert " ".join(c.text for c in chunks).split() == long_sentence.split()


def test_very_long_code_block_is_split_at_line_boundaries():
    lines = [f"print({i}, 'a b c')" for i in range(30)]  # 4 words per line
    block = "```python\n" + "\n".join(lines) + "\n```"
    chunks = chunk_section(Section(["Code"], block), size=20, overlap=0, count=words)
    assert len(chunks) > 1
    assert all(words(c.text) <= 20 for c in chunks)
    # Lines are never cut in the middle.
    emitted = [line for c in chunks for line in c.text.split("\n")]
    assert emitted == block.split("\n")


def test_very_long_line_inside_multiline_unit_is_split_further():
    block = "```\nshort line\n" + " ".join(["tok"] * 25) + "\n```"
    chunks = chunk_section(Section([], block), size=10, overlap=0, count=words)
    assert all(words(c.text) <= 10 for c in chunks)
    assert " ".join(c.text for c in chunks).split() == block.split()


def test_code_block_kept_whole_when_it_fits():
    # The block holds sentence-like breaks (". Y", ". N"): a prose paragraph would be cut there.
    code = '```python\nx = 1. Y = 2\nif x: print("Done. Next")\n```'
    prose = " ".join(sentence(f"P{i}p", 5) for i in range(3))
    text = f"{prose}\n\n{code}\n\n{sentence('Tail', 3)}"
    chunks = chunk_section(Section(["H"], text), size=16, overlap=0, count=words)
    holding = [c for c in chunks if "```python" in c.text]
    assert len(holding) == 1
    assert code in holding[0].text
    assert all(words(c.text) <= 16 for c in chunks)


@pytest.mark.parametrize("marker", ["- item one. Item two", "* star. Star", "1. First. Second", "| a. B | c |"])
def test_list_and_table_paragraphs_are_not_sentence_split(marker: str):
    chunks = chunk_section(Section([], marker), size=50, overlap=0, count=words)
    assert [c.text for c in chunks] == [marker]


def test_empty_section_gives_no_chunks():
    assert chunk_section(Section(["H"], "   \n\n  "), size=10, overlap=2, count=words) == []


def test_a_long_paragraph_is_cut_where_the_answers_see_a_sentence_end():
    """Ingestion and the quoting answerer split sentences alike (``anaphora.text.sentences``): a chunk never starts
    at "that ..." after "etc.", and a sentence that starts in lower case after a full stop is a sentence."""
    text = (
        "Tools like Nomad, Terraform, Ansible, etc. that define containers work with it. "
        "the provider reads their labels. Labels go on the service."
    )
    chunks = chunk_section(Section(["H"], text), size=14, overlap=0, count=words)
    starts = [c.text.split("\n")[0].split()[0] for c in chunks]
    assert "that" not in starts
    assert [line for c in chunks for line in c.text.split("\n")] == [
        "Tools like Nomad, Terraform, Ansible, etc. that define containers work with it.",
        "the provider reads their labels.",
        "Labels go on the service.",
    ]
