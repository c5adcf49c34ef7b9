"""``anaphora memory``: what is remembered across conversations (the local user's), listed with provenance,
forgotten one item at a time, or exported as JSON lines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from anaphora.app import Anaphora
from anaphora.cli.render import provenance, shown, terminal, when
from anaphora.errors import InputError
from anaphora.memory.portable import export_lines
from anaphora.memory.types import MemoryItem
from anaphora.settings import load_settings

memory_app = typer.Typer(help="List, forget and export what is remembered across conversations.", no_args_is_help=True)
console = terminal()
notes = terminal(stderr=True)  # what is not the data itself, when the data goes to stdout


def _open(ctx: typer.Context) -> Anaphora:
    return Anaphora(load_settings(**ctx.obj))


def validity(item: MemoryItem) -> str:
    if item.kind != "fact":
        return ""
    if item.current:
        return "current"
    return f"until {when(item.valid_to)}" if item.valid_to is not None else "superseded"


@memory_app.command("list")
def memory_list(
    ctx: typer.Context,
    kind: Annotated[Literal["episode", "fact"] | None, typer.Option(help="only episodes or only facts")] = None,
    limit: Annotated[int, typer.Option(min=1, help="at most this many")] = 50,
    offset: Annotated[int, typer.Option(min=0, help="skip the newest OFFSET first (paging)")] = 0,
) -> None:
    """Remembered items, newest first, each with where it came from."""
    with _open(ctx) as rag:
        page = rag.memories(kind=kind, limit=limit, offset=offset)
    for item in page.items:
        state = validity(item)
        console.print(
            f"[cyan]{shown(item.id)}[/cyan]  {item.kind:<7}  "
            f"[dim]{shown(provenance(item.conversation_id, item.turns, item.time))}"
            + (f" · {state}" if state else "")
            + "[/dim]"
        )
        console.print(f"  {shown(item.text)}")
    if not page.items:
        console.print("[dim]nothing remembered yet[/dim]" if offset == 0 else "[dim]no more memories[/dim]")
    elif page.next_offset is not None:
        console.print(f"[dim]more: anaphora memory list --offset {page.next_offset} --limit {limit}[/dim]")


@memory_app.command("forget")
def memory_forget(ctx: typer.Context, memory_id: Annotated[str, typer.Argument(help="the id `list` shows")]) -> None:
    """Forget one remembered item."""
    with _open(ctx) as rag:
        rag.forget(memory_id.strip())
    console.print(f"forgot {shown(memory_id.strip())}")


@memory_app.command("export")
def memory_export(
    ctx: typer.Context,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write to this new file (default: stdout)")
    ] = None,
) -> None:
    """Everything remembered, as JSON lines: items (with provenance), then entities, then the profile."""
    if output is not None and output.exists():
        raise InputError(f"{output} exists already", hint="choose a new file name, or write to stdout and redirect")
    with _open(ctx) as rag:
        lines = list(export_lines(rag.export_memory()))
    text = "".join(line + "\n" for line in lines)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        with output.open("x", encoding="utf-8") as file:  # "x": never overwrite a file created meanwhile
            file.write(text)
    except OSError as exc:
        raise InputError(f"cannot write {output}: {exc}", hint="choose a writable path for --output") from exc
    notes.print(f"wrote {len(lines)} records to {shown(str(output))}")
