"""Guards on generated answers, for models that loop or echo the prompt (SmolLM2-135M does both).

- :class:`RepetitionGuard` watches the stream and says when to stop: a sentence or line that comes back, or the
  prompt's own markup showing up in the answer.

When nothing usable remains, the generate stage quotes the passages with the extractive answerer
(:mod:`anaphora.answering.extractive`), which never invents anything.
"""

from __future__ import annotations

import re

ANSWER_STOP = ("<<<", "\nQuestion:", "<|im_start|>", "<|im_end|>")
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
# the prompt's own markup coming back: context fences, the "Question:" line, an excerpt label "[id] (source ...)"
_LEAKED = re.compile(r"<<<\s*(END\s+)?CONTEXT|^\s*Question:|^\s*\[[^\]\n]+\]\s*\(", re.IGNORECASE | re.MULTILINE)
MIN_REPEAT_WORDS = 5


def _norm(sentence: str) -> str:
    return " ".join(re.findall(r"\w+", sentence.lower()))


class RepetitionGuard:
    """Feed it the text so far; :meth:`check` returns the usable prefix once the model starts repeating."""

    def __init__(self) -> None:
        self.tripped = False

    def check(self, text: str, *, final: bool = False) -> str | None:
        """``None`` while the text is fine; else the text cut before the first repeated sentence or leak.
        ``final`` says the text is complete, so its last sentence is judged even without a closing period."""
        leak = _LEAKED.search(text)
        cut = leak.start() if leak else None
        seen: set[str] = set()
        position = 0
        for piece in _SPLIT.split(text):
            start = text.find(piece, position)
            position = start + len(piece)
            if position == len(text) and not final and not text.endswith((".", "!", "?", "\n")):
                break  # the last sentence is still being written
            key = _norm(piece)
            if len(key.split()) >= MIN_REPEAT_WORDS:
                if key in seen:
                    cut = start if cut is None else min(cut, start)
                    break
                seen.add(key)
        if cut is None:
            return None
        self.tripped = True
        return text[:cut].rstrip()
