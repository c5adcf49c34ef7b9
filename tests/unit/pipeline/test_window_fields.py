"""What the next turn needs of a stored turn is stored as explicit fields (``shown_passages``, ``window_start``);
the trace is audit only. The prompts of a conversation are the same whether or not the stored turns still carry
their traces, and nothing on the way to a prompt reads one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import anaphora.pipeline.window
from anaphora import FakeChatModel, Settings
from anaphora.app import build_components
from anaphora.pipeline.engine import TurnRequest
from anaphora.pipeline.prompt import CONTEXT_OPEN
from anaphora.store.protocols import ConversationStore, StoredTurn
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

PIPELINE = Path(anaphora.pipeline.window.__file__).parent
PROMPT_PATH = ("window.py", "budget.py", "prompt.py", "stages.py", "state.py")  # what builds a turn's prompt
QUESTIONS = [
    "How do I install Kestrel on Kubernetes?",
    "Which version of the Helm chart should I use?",
    "Does it run on ARM nodes?",
    "How much memory does the agent use?",
    "Where is the disk buffer kept?",
    "How do I upgrade the agent?",
    "Can it run on Windows?",
    "How do I install it on a Linux host?",
    "How is TLS turned on?",
    "Where do I put the certificates?",
    "How do I change the log level?",
    "How do I remove it again?",
]


class WithoutTraces:
    """The engine's conversation store, its turns read back with no trace (as if the audit record were gone)."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    async def turns(self, user_id: str, conversation_id: str, *, last: int | None = None) -> list[StoredTurn]:
        turns = await self.store.turns(user_id, conversation_id, last=last)
        return [t.model_copy(update={"trace": None}) for t in turns]


async def answer_prompts(tmp_path: Path, name: str, *, drop_traces: bool):
    settings = Settings(
        data_dir=tmp_path / name,
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        rewriter="expansion",
        history_excerpts="on",
        history_turns=8,
        history_min_turns=4,
        context_window=32768,
        history_budget_tokens=24000,
    )
    model = FakeChatModel()
    components = build_components(settings, model=model)
    components.ingestor.run([SAMPLE_DOCS])
    engine = components.engine
    if drop_traces:
        engine.conversations = WithoutTraces(engine.conversations)  # type: ignore[assignment]
    conversation_id = (await components.conversations.create("local")).id
    results = []
    try:
        for question in QUESTIONS:
            results.append(await engine.ask(TurnRequest(question, conversation_id=conversation_id)))
            await engine.drain()
        stored = await components.conversations.turns("local", conversation_id)
    finally:
        await engine.aclose()
        components.database.close()
    prompts = [c.messages for c in model.calls if c.messages[0].content == settings.prompt.system_prompt]
    return prompts, results, stored


async def test_the_prompts_do_not_depend_on_the_stored_traces(tmp_path: Path) -> None:
    with_traces, results, stored = await answer_prompts(tmp_path, "traces", drop_traces=False)
    without, _, _ = await answer_prompts(tmp_path, "none", drop_traces=True)
    assert len(with_traces) == len(QUESTIONS)
    assert without == with_traces
    # what the comparison covers: earlier turns shown again with their excerpts, and a window that folded
    assert any(sum(CONTEXT_OPEN in m.content for m in prompt[1:-1]) for prompt in with_traces)
    assert any(r.trace.budget.turns_folded for r in results)
    # the fields are the ones the engine wrote: what each prompt showed, where its window started
    for turn, result in zip(stored, results, strict=True):
        budget = result.trace.budget
        assert turn.window_start == turn.index - budget.turns_kept
        assert turn.shown_passages == result.trace.retrieved[: budget.passages_kept]


@pytest.mark.parametrize("module", PROMPT_PATH)
def test_nothing_on_the_prompt_path_reads_a_trace(module: str) -> None:
    tree = ast.parse((PIPELINE / module).read_text())
    reads = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "trace"]
    assert reads == [], f"pipeline/{module} reads .trace at lines {reads}: store what the next turn needs instead"
