"""The refusal to search passages embedded by another embedder names the setting that brings the stored one back."""

from __future__ import annotations

import pytest

from anaphora.store.protocols import embedder_mismatch

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("stored", "now", "setting"),
    [
        ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8", "ANAPHORA_EMBEDDER_PRECISION=fp32"),
        ("all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2", "ANAPHORA_EMBEDDER_PRECISION=int8"),
        ("hashing-384", "all-MiniLM-L6-v2", "ANAPHORA_EMBEDDER back"),
    ],
)
def test_the_hint_names_the_setting_and_the_re_embedding_ingest(stored: str, now: str, setting: str) -> None:
    error = embedder_mismatch(stored, now)
    assert repr(stored) in error.message and repr(now) in error.message
    assert setting in error.hint and "anaphora ingest PATH re-embeds the stored passages" in error.hint
