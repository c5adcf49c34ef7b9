"""Episodes written before issue 24 held the turn's question and the assistant's answer ("question\\nanswer"); a
memory store's migration leaves each the user's words only. Shared by the SQLite and PostgreSQL steps."""

from __future__ import annotations


def users_words(text: str, question: str | None) -> str:
    """An old episode's user's words: as many lines as the stored turn's ``question`` has (the first line when the
    turn is gone). An episode already holding the user's words only is returned as it is."""
    lines = question.strip().count("\n") + 1 if question is not None else 1
    return "\n".join(text.split("\n")[:lines]).strip()
