"""Saved KV states of an in-process llama.cpp context, so that a prompt finds its prefix evaluated although other
calls ran in between.

llama-cpp-python reuses the live context's longest token prefix on its own. One context serves every call, though:
the rewrite call of a follow-up shares a few tokens with the previous answer's prompt, and overwrites the rest. So
before a call would discard most of the live state, the state (the KV cells of sequence 0 and their tokens, no
logits) is copied out; before a call that a saved state serves better than the live one, that state is copied
back. Copies go through ``llama_state_seq_get_data`` / ``llama_state_seq_set_data``: the KV cells only, about
tokens x KV bytes per token (SmolLM2-135M: 23 KiB; a 7B model with grouped-query attention such as Mistral 7B or
Llama 3 8B: 128 KiB; Llama 2 7B without it: 512 KiB), where ``Llama.save_state`` would also copy an n_batch x
vocabulary logits array (100 MB for SmolLM2) every time. States are kept least recently used first, within a byte
budget.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MIN_TOKENS = 64  # shorter states are cheaper to evaluate again than to keep


@dataclass(slots=True, eq=False)  # states are told apart by identity
class SavedState:
    tokens: np.ndarray
    data: Any = field(repr=False)  # a ctypes uint8 array
    size: int = 0


def shared_prefix(a: np.ndarray | list[int], b: np.ndarray | list[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


class KVStates:
    """The saved states of one ``llama_cpp.Llama``; every method must be called under the model's lock."""

    def __init__(self, capacity_bytes: int, bindings: Any = None) -> None:
        """``bindings``: the llama.cpp C API (``llama_cpp``, imported on first use; tests pass a stand-in)."""
        self.capacity_bytes = capacity_bytes
        self._bindings = bindings
        self._states: list[SavedState] = []  # least recently used first
        self.saves = 0
        self.restores = 0

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self._states)

    def prepare(self, llama: Any, prompt: list[int]) -> int:
        """Make the live context hold the longest prefix of ``prompt`` available, keeping the live state first if
        this call would discard most of it. Returns how many prompt tokens llama.cpp will not evaluate."""
        llama_cpp = self._bindings = self._bindings or _bindings()
        live = llama.input_ids[: llama.n_tokens]
        live_match = shared_prefix(live, prompt)
        best = max(self._states, key=lambda s: shared_prefix(s.tokens, prompt), default=None)
        best_match = shared_prefix(best.tokens, prompt) if best is not None else 0
        if best is not None and best_match > live_match:
            self._keep(llama, llama_cpp, live)
            self._restore(llama, llama_cpp, best)
            live_match = shared_prefix(llama.input_ids[: llama.n_tokens], prompt)
        elif live_match < len(live) // 2:  # an unrelated prompt: it would overwrite most of the live state
            self._keep(llama, llama_cpp, live)
        # llama.cpp evaluates at least the prompt's last token again, for fresh logits
        return min(live_match, len(prompt) - 1) if prompt else 0

    def _keep(self, llama: Any, llama_cpp: Any, live: np.ndarray) -> None:
        if len(live) < MIN_TOKENS or self.capacity_bytes <= 0:
            return
        for saved in self._states:
            if shared_prefix(saved.tokens, live) == len(live):  # already kept (it holds live, or more)
                self._touch(saved)
                return
        size = llama_cpp.llama_state_seq_get_size(llama.ctx, 0)
        if size > self.capacity_bytes:
            return
        data = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(llama.ctx, data, size, 0)
        if not written:
            return
        # a kept state that is a prefix of this one is superseded by it
        self._states = [s for s in self._states if shared_prefix(s.tokens, live) < len(s.tokens)]
        self._touch(SavedState(live.copy(), data, written))
        self.saves += 1

    def _touch(self, state: SavedState) -> None:
        """Make ``state`` the most recently used (adding it if it is not kept), then drop the least recently used
        others until the states fit the budget."""
        self._states = [s for s in self._states if s is not state] + [state]
        while self.bytes > self.capacity_bytes and len(self._states) > 1:
            self._states.pop(0)

    def _restore(self, llama: Any, llama_cpp: Any, state: SavedState) -> None:
        memory = llama_cpp.llama_get_memory(llama.ctx)
        llama_cpp.llama_memory_seq_rm(memory, 0, -1, -1)
        if not llama_cpp.llama_state_seq_set_data(llama.ctx, state.data, state.size, 0):
            llama.n_tokens = 0  # nothing usable is left in the context: the call evaluates its whole prompt
            return
        # keep all but the last token, so llama.cpp always decodes at least one token and samples fresh logits
        kept = len(state.tokens) - 1
        llama_cpp.llama_memory_seq_rm(memory, 0, kept, -1)
        llama.input_ids[:kept] = state.tokens[:kept]
        llama.n_tokens = kept
        self._touch(state)  # kept even if saving the live state just pushed it out
        self.restores += 1


def _bindings() -> Any:
    import llama_cpp

    return llama_cpp
