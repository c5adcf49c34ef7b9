"""``anaphora feedback`` (vote on an answer of the local user's) and ``anaphora report`` (the operator's report
over every user's turns in the store)."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Literal

import typer

from anaphora.app import Anaphora
from anaphora.cli.render import inert, shown, terminal
from anaphora.report import ReportOptions, to_csv, to_text
from anaphora.report.grouping import MIN_SIMILARITY
from anaphora.report.ranges import time_range
from anaphora.settings import load_settings
from anaphora.turn_ids import parse_turn_ref

console = terminal()


def _open(ctx: typer.Context) -> Anaphora:
    return Anaphora(load_settings(**ctx.obj))


def feedback(
    ctx: typer.Context,
    turn: Annotated[
        str, typer.Argument(help="CONVERSATION:INDEX (0-based, as `conversations show` counts) or resp_...")
    ],
    vote: Annotated[Literal["up", "down", "clear"], typer.Argument(help="up, down, or clear to withdraw your vote")],
    comment: Annotated[str, typer.Option("--comment", "-m", help="what was right or wrong")] = "",
) -> None:
    """Vote on an answer: thumbs up or down, with an optional comment. A new vote replaces the old one."""
    conversation_id, index = parse_turn_ref(turn)
    with _open(ctx) as rag:
        if vote == "clear":
            existed = rag.unrate(conversation_id, index)
            console.print(f"vote on {shown(conversation_id)}:{index} " + ("withdrawn" if existed else "was not cast"))
            return
        given = rag.rate(conversation_id, index, vote, comment)
    said = f' with "{shown(given.comment)}"' if given.comment else ""
    console.print(f"voted {given.vote} on {shown(conversation_id)}:{index}{said}")


def report(
    ctx: typer.Context,
    since: Annotated[
        str | None, typer.Option(help="start: 2026-12-01, 2026-12-01T09:30 (UTC), Unix seconds, or 7d / 24h back")
    ] = None,
    until: Annotated[str | None, typer.Option(help="end (exclusive), in the same forms; default: now")] = None,
    format: Annotated[
        Literal["text", "json", "csv"], typer.Option("--format", "-f", help="text, json or csv")
    ] = "text",
    top: Annotated[int, typer.Option(min=1, help="topics and pages listed")] = 20,
    rows: Annotated[int, typer.Option(min=1, help="gap and thumbs-down rows listed")] = 200,
    min_similarity: Annotated[
        float, typer.Option(min=0, max=1, help="how similar two searches must be to count as one topic")
    ] = MIN_SIMILARITY,
) -> None:
    """What readers asked most (by what was searched) and did not get: refused and weakly supported questions,
    thumbs-down answers, pages cited most and never. Reads every user's turns: an operator's command."""
    start, end = time_range(since, until, time.time())
    with _open(ctx) as rag:
        found = rag.report(start, end, ReportOptions(top=top, rows=rows, min_similarity=min_similarity))
    if format == "json":
        sys.stdout.write(found.model_dump_json(indent=2) + "\n")
    elif format == "csv":
        sys.stdout.write(to_csv(found))
    else:
        console.print(inert(to_text(found)), markup=False, end="")
