"""A bounded memo of token counts, for a tokenizer that is costly to call on every turn.

The prompt budget counts every passage, memory and earlier turn a turn may show, and in the extractive default
the same passages and turns come back turn after turn: with llama.cpp those counts were a fifth of a warm turn's
CPU, each one waiting for the model's lock (which a background summary holds while it generates). A count is a
pure function of the text, so it is kept, keyed by a digest of the text (the memo holds no text), least recently
used first out.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

from anaphora.lru import Lru

MAX_COUNTS = 16_384  # about 1.5 MB


class TokenCounts:
    def __init__(self, count: Callable[[str], int], *, max_entries: int = MAX_COUNTS) -> None:
        self.count = count
        self._counts: Lru[bytes, int] = Lru(max_entries)
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __call__(self, text: str) -> int:
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            found = self._counts.get(key)
            if found is not None:
                self.hits += 1
                return found
        tokens = self.count(text)
        with self._lock:
            self.misses += 1
            self._counts.put(key, tokens)
        return tokens
