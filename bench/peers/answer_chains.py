"""LangChain's and LlamaIndex's conversational answer chains on the grounded-answer measures, with the same SmolLM2
instance, corpus and first stage as bench/answers.py.

    python bench/peers/answer_chains.py [--domains clapnq,fiqa] [--limit N] [--model embedded|fake]

- ``langchain``: ``create_retrieval_chain(create_history_aware_retriever(...), create_stuff_documents_chain(...))``
  with the prompts of LangChain's conversational-RAG docs;
- ``llamaindex``: ``CondensePlusContextChatEngine.achat`` (its default prompts).
Both answer from the passages their own condensed query retrieved; the measures are those of bench/answers.py,
against those passages. The same tasks as bench/answers.py (spread over the conversations). Results:
bench/results/peer_answers.json; bench/report.py puts them beside ours.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/common.py, bench/answers.py
sys.path.insert(0, str(HERE))

from adapters import MeteredChatModel, langchain_adapters, llamaindex_adapters  # noqa: E402
from answers import aggregate, measures  # noqa: E402
from common import CACHE, domain_paths, git_revision, machine, summary_ms, write_result  # noqa: E402
from run import LANGCHAIN_CONTEXTUALIZE_SYSTEM, clean  # noqa: E402

from anaphora import Settings  # noqa: E402
from anaphora.app import build_components  # noqa: E402
from anaphora.evaluation import load_tasks  # noqa: E402
from anaphora.models import load_chat_model  # noqa: E402
from anaphora.models.fake import FakeChatModel  # noqa: E402

# LangChain's conversational-RAG docs ("Add chat history"): the answer prompt used with create_stuff_documents_chain
LANGCHAIN_QA_SYSTEM = (
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context to answer "
    "the question. If you don't know the answer, say that you don't know. Use three sentences maximum and keep the "
    "answer concise.\n\n{context}"
)


ANSWERS_TASKS = 20  # the tasks per domain of bench/answers.py's recorded run; the peers answer a share of them


class LangChainAnswers:
    name = "langchain"

    def __init__(self, components, model: MeteredChatModel) -> None:
        from langchain_classic.chains import create_history_aware_retriever, create_retrieval_chain
        from langchain_classic.chains.combine_documents import create_stuff_documents_chain
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

        chat_cls, retriever_cls = langchain_adapters()
        llm = chat_cls(backend=model)
        condense = ChatPromptTemplate.from_messages(
            [("system", LANGCHAIN_CONTEXTUALIZE_SYSTEM), MessagesPlaceholder("chat_history"), ("human", "{input}")]
        )
        answer = ChatPromptTemplate.from_messages(
            [("system", LANGCHAIN_QA_SYSTEM), MessagesPlaceholder("chat_history"), ("human", "{input}")]
        )
        retriever = create_history_aware_retriever(llm, retriever_cls(hybrid=components.retriever), condense)
        self.chain = create_retrieval_chain(retriever, create_stuff_documents_chain(llm, answer))
        self.types = {"user": HumanMessage, "assistant": AIMessage}

    async def answer(self, question, history) -> tuple[str, list[str]]:
        chat_history = [self.types[m.role](content=m.content) for m in history if m.role in self.types]
        out = await self.chain.ainvoke({"input": question, "chat_history": chat_history})
        return out["answer"], [d.page_content for d in out["context"]]


class LlamaIndexAnswers:
    name = "llamaindex"

    def __init__(self, components, model: MeteredChatModel) -> None:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole
        from llama_index.core.chat_engine import CondensePlusContextChatEngine

        llm_cls, retriever_cls = llamaindex_adapters()
        llm = llm_cls(model, context_window=components.settings.models.context_window)
        self.engine = CondensePlusContextChatEngine.from_defaults(
            retriever=retriever_cls(components.retriever), llm=llm
        )
        self.ChatMessage = ChatMessage
        self.roles = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}

    async def answer(self, question, history) -> tuple[str, list[str]]:
        chat_history = [self.ChatMessage(role=self.roles[m.role], content=m.content) for m in history]
        response = await self.engine.achat(question, chat_history=chat_history)
        return response.response, [n.node.get_content() for n in response.source_nodes]


async def run_domain(domain: str, limit: int, model_kind: str) -> dict:
    corpus, tasks_path = domain_paths(domain)
    settings = Settings(data_dir=CACHE / domain, chat_model=model_kind)
    model = MeteredChatModel(FakeChatModel() if model_kind == "fake" else load_chat_model(settings.models))
    components = build_components(settings, model=model)
    components.ingestor.run([corpus])
    tasks = [t for t in load_tasks(tasks_path) if t.answer]
    ours = tasks[:: max(1, len(tasks) // ANSWERS_TASKS)][:ANSWERS_TASKS]  # bench/answers.py --limit 20's tasks
    tasks = ours[:: max(1, len(ours) // limit)][:limit]  # evenly among them
    out = {}
    for system in (LangChainAnswers(components, model), LlamaIndexAnswers(components, model)):
        rows, ms, calls = [], [], []
        for task in tasks:
            question, history = clean(task)
            model.log.reset()
            started = time.perf_counter()
            text, shown = await system.answer(question, history)
            ms.append((time.perf_counter() - started) * 1000)
            calls.append(model.log.calls)
            conversation = [question, *(m.content for m in history)]
            rows.append(measures(text, shown, [*shown, *conversation], task.answer))
        summary = aggregate(rows)
        summary["turn_ms"] = summary_ms(ms)
        summary["model_calls_per_turn"] = round(statistics.fmean(calls), 3)
        out[system.name] = summary
        print(domain, system.name, json.dumps({k: v for k, v in summary.items() if k != "turn_ms"}), flush=True)
    components.database.close()
    return {"tasks": len(tasks), "systems": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", default="clapnq,fiqa")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--model", default="embedded")
    args = parser.parse_args()
    started = time.time()
    results = {domain: asyncio.run(run_domain(domain, args.limit, args.model)) for domain in args.domains.split(",")}
    path = write_result(
        "peer_answers",
        {
            "date": date.today().isoformat(),
            "machine": machine(),
            "revision": git_revision(),
            "command": f"python bench/peers/answer_chains.py --domains {args.domains} --limit {args.limit} "
            f"--model {args.model}",
            "seconds": round(time.time() - started),
            "results": results,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
