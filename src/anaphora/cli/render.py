"""Rich rendering for the CLI: answers with sources, traces, ingestion reports.

Text from documents, file names, questions and answers is untrusted: it goes through :func:`inert` (control
characters shown, not obeyed, so an ``ESC [2J`` in a passage cannot clear the terminal) and, inside markup, through
:func:`shown` (inert, and its ``[brackets]`` taken literally).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from anaphora.ingest import IngestReport
from anaphora.ingest.skips import group_skipped
from anaphora.types import TurnResult, TurnTrace

MEMORY_SOURCE = "memory"  # the source of the memory items a turn shows beside its passages (TurnState.memory_passages)
# C0 controls but tab and newline, DEL, C1 controls (CSI, OSC as single bytes), bidirectional overrides and isolates
# (which reorder what the terminal shows), and lone surrogates (undecodable file-name bytes)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


UNWRAPPED_WIDTH = 240  # output to a file with no terminal anywhere: tables this wide, text lines not wrapped at all


def terminal(*, stderr: bool = False) -> Console:
    """A console for the CLI. Piped (``anaphora ask ... | less``, ``> log``) it keeps the width of the terminal
    the command runs in, found on any of stdin/stdout/stderr, instead of Rich's 80 columns; with no terminal at
    all it does not wrap text and gives tables :data:`UNWRAPPED_WIDTH` columns. ``COLUMNS`` still wins."""
    width = None
    if not os.environ.get("COLUMNS"):
        for fd in (1, 2, 0):
            try:
                width = os.get_terminal_size(fd).columns
                break
            except OSError:
                continue
        else:
            width = UNWRAPPED_WIDTH
    return Console(stderr=stderr, highlight=False, width=width, soft_wrap=width == UNWRAPPED_WIDTH)


def inert(text: str) -> str:
    """``text`` with every control character written out (``ESC`` as ``\\x1b``): safe to send to a terminal."""
    return _CONTROL.sub(_visible, text)


def shown(text: str) -> str:
    """:func:`inert` text for a string with Rich markup around it."""
    return escape(inert(text))


def weighed(trace: TurnTrace, query: str) -> str:
    """How much ``query``'s ranking counted in the turn's fusion, when several queries were searched: " (weight
    0.42)", or " (left out)" for one the fusion gave nothing (a phrasing no clearer than the message)."""
    if len(trace.query_weights) < 2 or query not in trace.query_weights:
        return ""
    weight = trace.query_weights[query]
    return f" [dim](weight {weight:.2f})[/dim]" if weight > 0 else " [dim](left out)[/dim]"


def cell(text: str) -> Text:
    """A table cell: inert, no markup."""
    return Text(inert(text))


def when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def provenance(conversation_id: str, turns: Sequence[int], timestamp: float) -> str:
    """Where a memory came from: ``conversation ID, turn 3, 2026-12-01 10:40 UTC`` (turns counted from 1, as a
    person counts them; the API's are 0-based indexes)."""
    label = "turn" if len(turns) == 1 else "turns"
    return f"conversation {conversation_id}, {label} {', '.join(str(t + 1) for t in turns)}, {when(timestamp)}"


def print_sources(console: Console, result: TurnResult) -> None:
    documents = [c for c in result.citations if c.source != MEMORY_SOURCE]
    if not documents:
        if result.trace.retrieved and not result.citations:
            console.print("[dim]No passage cited.[/dim]")
        return
    attributed = all(c.how == "attributed" for c in documents)
    console.print(
        "[bold]Sources[/bold]" + (" [dim](matched by wording; the model cited none)[/dim]" if attributed else "")
    )
    for citation in documents:
        where = f" — {citation.heading}" if citation.heading else ""
        console.print(f"  [cyan]{shown(f'[{citation.id}]')}[/cyan] {shown(citation.source + where)}")
        if citation.url:
            console.print(Text("    ").append(link(citation.url)))


_SAFE_URL = re.compile(r"^https?://[^\s\x00-\x1f\x7f-\x9f]+$")


def link(url: str) -> Text:
    """A URL as text that terminals supporting OSC 8 make clickable (rich emits the hyperlink only to a terminal);
    a URL with anything odd in it is shown inert and not linked."""
    if _SAFE_URL.match(url):
        return Text(url, style=f"link {url}")
    return Text(inert(url))


def gist(text: str, limit: int = 100) -> str:
    """The first line of ``text``, cut at a word to at most ``limit`` characters (an episode holds a whole turn)."""
    line = text.strip().split("\n", 1)[0]
    if len(line) <= limit and line == text.strip():
        return line
    return line[:limit].rsplit(" ", 1)[0] + " …"


def print_memories(console: Console, result: TurnResult) -> None:
    """The long-term memories the prompt showed, each with where it came from, marked when the answer cites it."""
    shown_memories = [m for m in result.trace.memory if m.injected]
    if not shown_memories:
        return
    cited = {c.id for c in result.citations}
    console.print("[bold]From memory[/bold]")
    for memory in shown_memories:
        mark = "" if memory.passage_id in cited else " [dim](shown, not cited)[/dim]"
        state = "" if memory.kind != "fact" else (", current" if memory.current else ", superseded")
        console.print(f"  [cyan]{shown(f'[{memory.passage_id}]')}[/cyan] {shown(gist(memory.text))}{mark}")
        where = provenance(memory.conversation_id, memory.turns, memory.time)
        console.print(f"    [dim]you said it in {shown(where)} ({memory.kind}{state})[/dim]")


TRACE_TEXT = 80  # characters of a recalled item's text and reasons in the trace table (the API has them whole)


def print_trace(console: Console, result: TurnResult) -> None:
    trace = result.trace
    table = Table(title="Turn trace", show_header=True, header_style="bold", title_justify="left")
    table.add_column("stage")
    table.add_column("status")
    table.add_column("ms", justify="right")
    table.add_column("detail", overflow="fold")
    for stage in trace.stages:
        table.add_row(cell(stage.name), cell(stage.status), f"{stage.ms:.1f}", cell(stage.detail))
    console.print(table)
    console.print(f"[bold]route[/bold]: {trace.route or '—'} ({shown(trace.route_reason)})")
    if trace.retrieval_skipped:
        console.print("[bold]retrieval skipped[/bold]: answered from the conversation")
    else:
        console.print(f"[bold]query[/bold] ({trace.query_source}){weighed(trace, trace.query)}: {shown(trace.query)}")
        for alternate in trace.alternate_queries:
            console.print(f"  [dim]also[/dim]{weighed(trace, alternate)}: {shown(alternate)}")
    if trace.abstained:
        console.print("[bold]abstained[/bold]: no passage passed the relevance thresholds")
    console.print(f"[bold]model calls[/bold]: {trace.model_calls}   [bold]prompt tokens[/bold]: {trace.prompt_tokens}")
    if trace.budget:
        b = trace.budget
        console.print(
            f"[bold]budget[/bold]: {b.used}/{b.budget} tokens — system {b.system}, summary {b.summary}, "
            f"history {b.history} ({b.turns_kept}/{b.turns_available} turns, {b.turns_evicted_for_budget} evicted), "
            f"passages {b.passages} ({b.passages_kept} kept, {b.passages_dropped} dropped), question {b.question}"
            + (f"; {b.turns_folded} turns folded into the summary" if b.turns_folded else "")
        )
    for call in trace.calls:
        first = f", first token {call.first_token_ms:.0f} ms" if call.first_token_ms is not None else ""
        console.print(
            f"  [dim]{call.purpose}[/dim]: {call.prompt_tokens} prompt tokens, {call.cached_tokens} from cache{first}"
        )
    print_trace_tables(console, trace)


def print_trace_tables(console: Console, trace: TurnTrace) -> None:
    """The trace's retrieved passages and recalled memories, as tables."""
    retrieved = Table(show_header=True, header_style="bold", title="Retrieved", title_justify="left")
    for column in ("id", "score", "bm25", "dense", "rerank", "heading"):
        retrieved.add_column(column, overflow="fold")
    for p in trace.retrieved:
        retrieved.add_row(
            cell(p.id),
            f"{p.score:.4f}",
            "" if p.bm25_score is None else f"{p.bm25_score:.2f}",
            "" if p.dense_score is None else f"{p.dense_score:.3f}",
            "" if p.rerank_score is None else f"{p.rerank_score:.3f}",
            cell(p.heading),
        )
    if trace.retrieved:
        console.print(retrieved)
    if trace.memory:
        recalled = Table(show_header=True, header_style="bold", title="Recalled from memory", title_justify="left")
        for column in ("id", "shown", "score", "cosine", "text", "why"):
            recalled.add_column(column, overflow="fold")
        for m in trace.memory:
            similarity = "" if m.similarity is None else f"{m.similarity:.3f}"
            recalled.add_row(
                cell(m.id),
                "yes" if m.injected else "no",
                f"{m.score:.3f}",
                similarity,
                cell(gist(m.text, TRACE_TEXT)),
                cell(gist(m.why, TRACE_TEXT)),
            )
        console.print(recalled)


def print_ingest_report(console: Console, report: IngestReport, *, verbose: bool = False) -> None:
    """The summary; skipped files grouped by reason and file type with a count, named one by one with ``verbose``."""
    console.print(
        f"[bold]Ingested[/bold] in {report.seconds:.1f}s: {len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.removed)} removed, {len(report.skipped)} skipped; "
        f"{report.chunks_written} chunks written"
        + (f" ({report.ahead_embedded} answer units embedded with them)." if report.ahead_embedded else ".")
    )
    if verbose:
        for path, reason in report.skipped:
            console.print(f"  [yellow]skipped[/yellow] {shown(path)}: {shown(reason)}")
    else:
        for group in group_skipped(report.skipped):
            types = ", ".join(f"{kind} {count}" for kind, count in group.types.most_common())
            noun = "file" if group.count == 1 else "files"
            console.print(f"  [yellow]skipped[/yellow] {group.count} {noun}: {shown(group.reason)} ({shown(types)})")
        if report.skipped:
            console.print("  [dim]--verbose names each skipped file with its reason[/dim]")
    for path, warning in report.warnings:
        console.print(f"  [yellow]warning[/yellow] {shown(path)}: {shown(warning)}")
    for source in report.removed:
        console.print(f"  [dim]removed[/dim] {shown(source)}")
