"""Rich rendering for the CLI: answers with sources, traces, ingestion reports."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from anaphora.ingest import IngestReport
from anaphora.types import TurnResult


def print_sources(console: Console, result: TurnResult) -> None:
    if not result.citations:
        if result.trace.retrieved:
            console.print("[dim]No passage cited.[/dim]")
        return
    attributed = all(c.how == "attributed" for c in result.citations)
    console.print(
        "[bold]Sources[/bold]" + (" [dim](matched by wording; the model cited none)[/dim]" if attributed else "")
    )
    for citation in result.citations:
        where = f" — {citation.heading}" if citation.heading else ""
        console.print(f"  [cyan]{escape(f'[{citation.id}]')}[/cyan] {escape(citation.source + where)}")


def print_trace(console: Console, result: TurnResult) -> None:
    trace = result.trace
    table = Table(title="Turn trace", show_header=True, header_style="bold", title_justify="left")
    table.add_column("stage")
    table.add_column("status")
    table.add_column("ms", justify="right")
    table.add_column("detail", overflow="fold")
    for stage in trace.stages:
        table.add_row(stage.name, stage.status, f"{stage.ms:.1f}", stage.detail)
    console.print(table)
    console.print(f"[bold]route[/bold]: {trace.route or '—'} ({escape(trace.route_reason)})")
    if trace.retrieval_skipped:
        console.print("[bold]retrieval skipped[/bold]: answered from the conversation")
    else:
        console.print(f"[bold]query[/bold] ({trace.query_source}): {escape(trace.query)}")
        for alternate in trace.alternate_queries:
            console.print(f"  [dim]also[/dim]: {escape(alternate)}")
    if trace.abstained:
        console.print("[bold]abstained[/bold]: no passage passed the relevance thresholds")
    console.print(f"[bold]model calls[/bold]: {trace.model_calls}   [bold]prompt tokens[/bold]: {trace.prompt_tokens}")
    if trace.budget:
        b = trace.budget
        console.print(
            f"[bold]budget[/bold]: {b.used}/{b.budget} tokens — system {b.system}, summary {b.summary}, "
            f"history {b.history} ({b.turns_kept}/{b.turns_available} turns, {b.turns_evicted_for_budget} evicted), "
            f"passages {b.passages} ({b.passages_kept} kept, {b.passages_dropped} dropped), question {b.question}"
        )
    retrieved = Table(show_header=True, header_style="bold", title="Retrieved", title_justify="left")
    for column in ("id", "score", "bm25", "dense", "rerank", "heading"):
        retrieved.add_column(column, overflow="fold")
    for p in trace.retrieved:
        retrieved.add_row(
            p.id,
            f"{p.score:.4f}",
            "" if p.bm25_score is None else f"{p.bm25_score:.2f}",
            "" if p.dense_score is None else f"{p.dense_score:.3f}",
            "" if p.rerank_score is None else f"{p.rerank_score:.3f}",
            p.heading,
        )
    if trace.retrieved:
        console.print(retrieved)


def print_ingest_report(console: Console, report: IngestReport) -> None:
    console.print(
        f"[bold]Ingested[/bold] in {report.seconds:.1f}s: {len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.removed)} removed, {len(report.skipped)} skipped; "
        f"{report.chunks_written} chunks written."
    )
    for path, reason in report.skipped:
        console.print(f"  [yellow]skipped[/yellow] {path}: {reason}")
    for path, warning in report.warnings:
        console.print(f"  [yellow]warning[/yellow] {path}: {warning}")
    for source in report.removed:
        console.print(f"  [dim]removed[/dim] {source}")
