"""Token counts are remembered per text (the budget counts the same passages every turn), bounded, text-free."""

from __future__ import annotations

import pytest

from anaphora.models.llamacpp import LlamaCppChatModel, embedded_gguf_path
from anaphora.models.token_counts import TokenCounts

pytestmark = pytest.mark.unit


def test_each_text_is_counted_once_and_the_memo_is_bounded() -> None:
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return len(text.split())

    counts = TokenCounts(count, max_entries=2)
    assert [counts("one two"), counts("one two"), counts("three")] == [2, 2, 1]
    assert seen == ["one two", "three"] and (counts.hits, counts.misses) == (1, 2)
    counts("four five six")  # "one two" is the least recently used: out
    assert counts("three") == 1 and counts("one two") == 2
    assert seen == ["one two", "three", "four five six", "one two"]
    assert all(isinstance(key, bytes) for key in counts._counts)  # digests, not the texts


class CountingLlama:
    def __init__(self) -> None:
        self.calls = 0

    def tokenize(self, data: bytes, add_bos: bool, special: bool) -> list[int]:
        self.calls += 1
        return list(range(len(data.split())))


def test_the_embedded_model_tokenizes_a_text_once() -> None:
    model = LlamaCppChatModel(embedded_gguf_path())
    model._llama = llama = CountingLlama()  # loaded: warm_up does nothing
    passage = "Retention is configured per tenant in the limits block."
    assert [model.count_tokens(passage) for _ in range(3)] == [9, 9, 9]
    assert model.count_tokens("") == 0 and llama.calls == 1
