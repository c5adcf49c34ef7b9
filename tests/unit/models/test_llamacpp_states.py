"""KVStates, the saved KV states of the llama.cpp backend, against a stand-in for the llama.cpp C API (no model):
what is kept, what is restored, what the budget lets go, and the reused prefix each call reports."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from anaphora.models.llamacpp_states import KVStates, shared_prefix

pytestmark = pytest.mark.unit

BYTES_PER_TOKEN = 4


class FakeLlama:
    """The parts of ``llama_cpp.Llama`` KVStates touches, plus ``run``: what ``generate`` does to the context."""

    def __init__(self) -> None:
        self.ctx = object()
        self.input_ids = np.zeros(4096, dtype=np.intc)
        self.n_tokens = 0
        self.cells: list[int] = []  # the KV cells of sequence 0, one per token

    def run(self, prompt: list[int], generated: int = 5) -> None:
        reused = shared_prefix(self.input_ids[: self.n_tokens], prompt)
        tokens = [*prompt, *range(9000, 9000 + generated)]
        self.cells = self.cells[:reused] + tokens[reused:]
        self.input_ids[: len(tokens)] = tokens
        self.n_tokens = len(tokens)


class FakeBindings:
    def __init__(self, llama: FakeLlama) -> None:
        self.llama = llama

    def llama_state_seq_get_size(self, ctx, seq_id) -> int:
        return len(self.llama.cells) * BYTES_PER_TOKEN

    def llama_state_seq_get_data(self, ctx, dst, size, seq_id) -> int:
        raw = np.asarray(self.llama.cells, dtype=np.int32).tobytes()
        ctypes.memmove(dst, raw, len(raw))
        return len(raw)

    def llama_state_seq_set_data(self, ctx, src, size, seq_id) -> int:
        self.llama.cells = np.frombuffer(bytes(src)[:size], dtype=np.int32).tolist()
        return size

    def llama_get_memory(self, ctx):
        return ctx

    def llama_memory_seq_rm(self, memory, seq_id, p0, p1) -> bool:
        self.llama.cells = [] if p0 < 0 else self.llama.cells[:p0]
        return True


SYSTEM_AND_HISTORY = list(range(1, 301))
ANSWER_1 = [*SYSTEM_AND_HISTORY, *range(1000, 1200)]
ANSWER_2 = [*SYSTEM_AND_HISTORY, *range(2000, 2200)]
REWRITE_1 = [1, 2, 3, *range(5000, 5100)]
REWRITE_2 = [1, 2, 3, *range(5000, 5080), *range(6000, 6020)]


def setup(capacity_tokens: int) -> tuple[FakeLlama, KVStates]:
    llama = FakeLlama()
    return llama, KVStates(capacity_tokens * BYTES_PER_TOKEN, FakeBindings(llama))


def call(llama: FakeLlama, states: KVStates, prompt: list[int]) -> int:
    reused = states.prepare(llama, prompt)
    assert llama.cells == list(llama.input_ids[: llama.n_tokens])  # what the context holds is what it says
    llama.run(prompt)
    return reused


def test_the_answer_prefix_comes_back_after_a_short_call() -> None:
    llama, states = setup(capacity_tokens=10_000)
    assert call(llama, states, ANSWER_1) == 0
    assert call(llama, states, REWRITE_1) == 3  # the answer's state is kept before the rewrite overwrites it
    assert states.saves == 1
    assert call(llama, states, ANSWER_2) == len(SYSTEM_AND_HISTORY)  # restored: system prompt and history
    assert states.restores == 1
    assert call(llama, states, REWRITE_2) == 83  # and the previous rewrite's state serves the next rewrite
    assert states.restores == 2


def test_a_related_call_keeps_using_the_live_context_without_copies() -> None:
    llama, states = setup(capacity_tokens=10_000)
    call(llama, states, ANSWER_1)
    assert call(llama, states, ANSWER_2) == len(SYSTEM_AND_HISTORY)
    assert (states.saves, states.restores) == (0, 0)
    assert call(llama, states, ANSWER_2) == len(ANSWER_2) - 1  # the same prompt: all but its last token


def test_a_restored_state_survives_the_save_that_made_room_for_the_live_one() -> None:
    llama, states = setup(capacity_tokens=600)  # one answer state, or a rewrite and a little more
    call(llama, states, ANSWER_1)
    call(llama, states, REWRITE_1)  # keeps answer 1 (505 tokens)
    # keeping the rewrite (108 tokens) pushes answer 1 out of the budget, and answer 1 is the state to restore
    assert call(llama, states, ANSWER_2) == len(SYSTEM_AND_HISTORY)
    assert states.bytes <= 600 * BYTES_PER_TOKEN
    assert call(llama, states, REWRITE_2) == 3  # the rewrite state did not fit beside the answer state


def test_without_a_budget_nothing_is_kept() -> None:
    llama, states = setup(capacity_tokens=0)
    call(llama, states, ANSWER_1)
    call(llama, states, REWRITE_1)
    assert call(llama, states, ANSWER_2) == 3
    assert (states.saves, states.restores, states.bytes) == (0, 0, 0)


def test_short_states_are_not_worth_keeping() -> None:
    llama, states = setup(capacity_tokens=10_000)
    call(llama, states, list(range(1, 30)))
    call(llama, states, REWRITE_1)
    assert states.saves == 0
