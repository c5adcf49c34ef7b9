"""``anaphora eval``: retrieval, rewrite and answer evaluation on task files."""

from __future__ import annotations

import json
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from anaphora.app import Anaphora
from anaphora.cli.progress import IngestProgress
from anaphora.cli.render import shown, terminal
from anaphora.errors import InputError
from anaphora.evaluation import (
    QUERY_SOURCES,
    load_tasks,
    replay,
    replay_answers,
    replay_rewrites,
    retrieval_half,
    score,
    score_answers,
    score_rewrites,
)
from anaphora.settings import load_settings

eval_app = typer.Typer(help="Measure retrieval, rewrites and answers on multi-turn task files.", no_args_is_help=True)
console = terminal()
errors = terminal(stderr=True)

TasksOption = Annotated[Path, typer.Option("--tasks", help="task file (JSONL, shared/bench format)")]
CorpusOption = Annotated[Path, typer.Option("--corpus", help="passage corpus (JSONL: id, text) or a folder")]
IndexOption = Annotated[Path | None, typer.Option("--index", help="reusable index directory (default: throwaway)")]
LimitOption = Annotated[int | None, typer.Option("--limit", help="only the first N tasks")]
OutOption = Annotated[Path | None, typer.Option("--out", help="per-task records (JSONL)")]
ReportOption = Annotated[Path | None, typer.Option("--report", help="aggregate report (JSON)")]


def _parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError as exc:
        raise InputError(f"--k must be comma-separated integers, got {text!r}", hint="e.g. --k 1,3,5,10") from exc
    if not ks or ks[0] < 1:
        raise InputError("--k needs positive integers", hint="e.g. --k 1,3,5,10")
    return ks


def _open(ctx: typer.Context, stack: ExitStack, index: Path | None) -> Anaphora:
    data_dir = index or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="anaphora-eval-")))
    options = {**ctx.obj, "data_dir": data_dir}
    return stack.enter_context(Anaphora(load_settings(**options)))


def _ingest(rag: Anaphora, corpus: Path) -> None:
    if not corpus.exists():
        raise InputError(f"no corpus at {corpus}", hint="pass --corpus with a JSONL passage file or a folder")
    with IngestProgress(errors, label="indexing corpus") as progress:
        report = rag.ingest([corpus], progress=progress.chunks, reading=progress.files)
    for path, reason in report.skipped:
        errors.print(f"[yellow]skipped[/yellow] {shown(path)}: {shown(reason)}")
    errors.print(
        f"index: {sum(d.chunk_count for d in rag.components.corpus.documents())} passages "
        f"({report.chunks_written} embedded now, {len(report.unchanged)} files unchanged)"
    )


def _write(out: Path | None, records: list[dict[str, Any]], report_path: Path | None, report: dict) -> None:
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    if report_path:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps(report, indent=2), encoding="utf-8")


def _progress(label: str):
    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), console=errors, transient=True)
    task = bar.add_task(label, total=None)
    return bar, lambda done, total: bar.update(task, completed=done, total=total)


def print_retrieval_report(report: dict, ks: list[int]) -> None:
    table = Table(title=f"Retrieval ({report['query_source']})", title_justify="left")
    table.add_column("group")
    table.add_column("n", justify="right")
    for metric in ("recall", "ndcg"):
        for k in ks:
            table.add_column(f"{'R' if metric == 'recall' else 'nDCG'}@{k}", justify="right")
    for group, row in report["metrics"].items():
        cells = [row.get(f"{m}@{k}") for m in ("recall", "ndcg") for k in ks]
        table.add_row(group, str(row["n"]), *("—" if c is None else f"{c:.3f}" for c in cells))
    console.print(table)
    stages = ", ".join(f"{s} p50 {v['p50']:.1f} / p95 {v['p95']:.1f} ms" for s, v in report["stage_ms"].items())
    console.print(
        f"retrievals skipped: {report['retrievals_skipped']}   model calls per turn: "
        f"{report['model_calls_per_turn']} (turn 1: {report['model_calls_turn_1']})"
    )
    console.print(f"stages: {stages}")
    console.print(f"query stage status: {report['rewrite_status']}")


@eval_app.command("retrieval")
def eval_retrieval(
    ctx: typer.Context,
    corpus: CorpusOption,
    tasks: TasksOption,
    index: IndexOption = None,
    query_source: Annotated[str, typer.Option(help="|".join(QUERY_SOURCES))] = "pipeline",
    k: Annotated[str, typer.Option("--k", help="cut-offs, comma-separated")] = "1,3,5,10",
    limit: LimitOption = None,
    out: OutOption = None,
    report: ReportOption = None,
) -> None:
    """Replay every task through the turn pipeline and score what it retrieved."""
    if query_source not in QUERY_SOURCES:
        raise InputError(f"unknown --query-source {query_source!r}", hint=f"use one of {', '.join(QUERY_SOURCES)}")
    ks = _parse_ks(k)
    task_list = load_tasks(tasks, limit=limit)
    with ExitStack() as stack:
        rag = _open(ctx, stack, index)
        _ingest(rag, corpus)
        bar, progress = _progress("replaying tasks")
        with bar:
            records = rag.run(replay(retrieval_half(rag.components), task_list, query_source, progress))
        summary = {"query_source": query_source, "settings": _settings_summary(rag), **score(records, ks)}
        print_retrieval_report(summary, ks)
        _write(out, records, report, summary)


@eval_app.command("rewrite")
def eval_rewrite(
    ctx: typer.Context,
    tasks: TasksOption,
    limit: LimitOption = None,
    out: OutOption = None,
    report: ReportOption = None,
) -> None:
    """Score the query stage's rewrites against the tasks' reference rewrites."""
    task_list = load_tasks(tasks, limit=limit)
    with ExitStack() as stack:
        rag = _open(ctx, stack, None)
        records = rag.run(replay_rewrites(rag.components.stage_parts.query_stage, task_list))
        if not records:
            raise InputError(f"no task in {tasks} has a reference rewrite", hint="tasks need rewrite or gold_rewrite")
        summary = {"settings": _settings_summary(rag), **score_rewrites(records)}
        console.print_json(json.dumps(summary))
        _write(out, records, report, summary)


@eval_app.command("answers")
def eval_answers(
    ctx: typer.Context,
    corpus: CorpusOption,
    tasks: TasksOption,
    index: IndexOption = None,
    limit: LimitOption = None,
    out: OutOption = None,
    report: ReportOption = None,
) -> None:
    """Run full turns and compare answers with the references (slow with a real model)."""
    task_list = load_tasks(tasks, limit=limit)
    with ExitStack() as stack:
        rag = _open(ctx, stack, index)
        _ingest(rag, corpus)
        records = rag.run(replay_answers(rag.components.engine, task_list))
        summary = {"settings": _settings_summary(rag), **score_answers(records)}
        console.print_json(json.dumps(summary))
        _write(out, records, report, summary)


def _settings_summary(rag: Anaphora) -> dict[str, Any]:
    models, retrieval = rag.settings.models, rag.settings.retrieval
    return {
        "chat_model": models.chat_model,
        "embedder": models.embedder,
        "fusion": retrieval.fusion,
        "bm25_weight": retrieval.bm25_weight,
        "dense_weight": retrieval.dense_weight,
        "candidates": retrieval.candidates,
        "top_k": retrieval.top_k,
    }
